# Figures 14 and 15: exercises on emulated hosts at every link rate (14: dp and the zero reference
# at ZeRO-1, ZeRO-2 and FSDP; 15: dp, pp and tp). Left: seconds per step against the link rate,
# measured (solid) and modelled (dashed: the unlimited run's step plus rank 0's predicted bytes /
# rate). Right: rank 0's bytes per step, predicted and measured on its eth0, at each rate.
# datafile: one index per series (in the order of `series`), one row per rate-limited run:
#   gbit_per_s  seconds_per_step  model_seconds  predicted_MB  measured_MB
# Variables: datafile, outfile, provenance, series (names without spaces: "dp ZeRO-1 ZeRO-2 FSDP",
# "dp pp TP2xDP2 TP4"), heading, [format].
load ARG0[1:strlen(ARG0) - strlen("cluster_rates.gp")] . "style.gp"

n = words(series)
set multiplot layout 1,2 title heading font ",15"

set title "Time per step"
set xlabel "link rate (Gbit/s, log scale)"
set ylabel "seconds per step"
set logscale x
set yrange [0:*]
set key top right
plot for [i = 1:n] datafile index (i - 1) using 1:2 with linespoints lt i title word(series, i), \
     for [i = 1:n] datafile index (i - 1) using 1:3 with lines lt i dt (8, 5) notitle

set title "Bytes rank 0 sends per step"
set ylabel "MB per step"
set key top left
plot for [i = 1:n] datafile index (i - 1) using 1:5 with linespoints lt i title word(series, i) . " (eth0)", \
     for [i = 1:n] datafile index (i - 1) using 1:4 with lines lt i dt (8, 5) notitle
unset multiplot
