# Figure 12: the GPT-2 exercises on the emulated cluster. Left: dp at 1, 2, 4 hosts (batch per
# host fixed): seconds per step and tokens per second. Right: pp, every rank's bytes per step,
# predicted from the pipeline's boundaries and measured on its interface.
# datafile: index 0, one row per host count: hosts seconds_per_step tokens_per_second waiting_s
#           index 1, one row per rank of the rate-limited pp runs: position rank predicted_MB
#             measured_tx_MB hosts
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("cluster_lm.gp")] . "style.gp"

set multiplot layout 1,2 title "GPT-2 on emulated hosts: dp scaling, pp traffic" font ",15"

set title "dp: batch per host fixed"
set xlabel "hosts"
set xtics 1
set xrange [0.5:4.5]
set ylabel "seconds per step"
set y2label "tokens per second (all hosts)"
set yrange [0:*]
set y2range [0:*]
set y2tics
set key top left
plot datafile index 0 using 1:2 with linespoints lt 1 title "s / step", \
     datafile index 0 using 1:4 with linespoints lt 3 dt (6, 4) title "of it waiting", \
     datafile index 0 using 1:3 axes x1y2 with linespoints lt 2 title "tokens/s"

unset y2tics
unset y2label
set title "pp: bytes per step of each stage rank"
set xlabel "rank (2 hosts, then 4)"
set xrange [-0.6:*]
set xtics 1
set ylabel "MB per step"
set style fill solid 0.75 border -1
set boxwidth 0.35
set key below
plot datafile index 1 using ($1 - 0.18):3:xtic(2) with boxes lt 1 title "predicted (sent)", \
     datafile index 1 using ($1 + 0.18):4 with boxes lt 2 title "measured (eth0 tx)"
unset multiplot
