# Figure 11: GPipe and 1F1B on the stage ranks against the number of micro-batches m. Left: the
# micro-batches whose activations stage 0 held at once. Middle: milliseconds per step. Right: the
# idle share of the ranks measured on one step's timeline, against (n-1)/(m+n-1).
# datafile: index 0 GPipe, index 1 1F1B, one row per m:
#   m  ms_per_step  measured_bubble  ideal_bubble  stage0_peak_micro  stage0_peak_MB
# Variables: datafile, outfile, provenance, stages, [format].
load ARG0[1:strlen(ARG0) - strlen("pp_schedules.gp")] . "style.gp"

set multiplot layout 1,3 title sprintf("GPipe and 1F1B on %d stage ranks against the micro-batches", stages) font ",15"
set xlabel "micro-batches m (log scale)"
set logscale x 2
set xrange [0.75:11]
set xtics 2 format "%g"
set key top left

set title "Stored activations, stage 0"
set ylabel "micro-batches held at once"
set yrange [0:*]
plot datafile index 0 using 1:5 with linespoints lt 1 title "GPipe", \
     datafile index 1 using 1:5 with linespoints lt 2 title "1F1B"

set title "Time per step"
set ylabel "ms per step"
set yrange [0:*]
plot datafile index 0 using 1:2 with linespoints lt 1 title "GPipe", \
     datafile index 1 using 1:2 with linespoints lt 2 title "1F1B"

set title "Bubble: ranks idle"
set ylabel "fraction of rank time idle"
set yrange [0:1]
set key top right
plot datafile index 0 using 1:3 with linespoints lt 1 title "GPipe", \
     datafile index 1 using 1:3 with linespoints lt 2 title "1F1B", \
     datafile index 0 using 1:4 with lines lt 3 dt (10, 6) title "(n-1)/(m+n-1)"
unset multiplot
