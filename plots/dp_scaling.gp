# Figure 5: the dp exercise against the number of ranks, with the batch per rank fixed (weak
# scaling, as the original assignment) and with the global batch fixed (strong scaling). Left:
# time per epoch of the training set (mean step time x steps per epoch). Right: tokens per
# second summed over ranks, real tokens (solid) and with padding (dashed, open points).
# datafile: two blocks (index 0 weak, 1 strong):
#   ranks  ms_per_iteration  comm_ms  epoch_seconds  tokens_per_second  padded_tokens_per_second
# Variables: datafile, outfile, provenance, weak, strong (the two series' titles), [format].
load ARG0[1:strlen(ARG0) - strlen("dp_scaling.gp")] . "style.gp"

stats datafile using 1 nooutput
set logscale x 2
set xrange [STATS_min / 1.3 : STATS_max * 1.3]
set xtics 2 format "%g"
unset mxtics
set yrange [0:*]
set multiplot layout 1,2 title "GPT-2 data parallel (dp) vs number of ranks" font ",15"
set key top left vertical Left reverse

set title "Time per epoch"
set xlabel "ranks (processes; log scale)"
set ylabel "seconds per epoch"
plot datafile index 0 using 1:4 with linespoints lt 1 title weak, \
     datafile index 1 using 1:4 with linespoints lt 2 title strong

unset label 100
set key top right
set offsets 0, 0, graph 0.45, 0   # headroom for the key above the curves
set title "Throughput, summed over ranks"
set ylabel "tokens per second"
plot datafile index 0 using 1:5 with linespoints lt 1 title weak . ": real tokens", \
     datafile index 0 using 1:6 with linespoints lt 1 dt (10, 6) pt int(word(open_pt, 1)) title weak . ": with padding", \
     datafile index 1 using 1:5 with linespoints lt 2 title strong . ": real tokens", \
     datafile index 1 using 1:6 with linespoints lt 2 dt (10, 6) pt int(word(open_pt, 2)) title strong . ": with padding"
unset multiplot
