# Figure 4: task3's time per iteration against DDP's bucket cap (log scale), with the part spent
# waiting for gradient buckets; under each cap, the number of buckets it gave.
# datafile: bucket_cap_mb  ms_per_iteration  stdev_ms  comm_ms  buckets
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("sweep.gp")] . "style.gp"

stats datafile using 1 nooutput
set logscale x
set xrange [STATS_min / 1.8 : STATS_max * 1.8]
stats datafile using ($2 + $3) nooutput
set yrange [0 : STATS_max * 1.3]
set title "DDP bucket cap: time per iteration and waiting for buckets (task3)"
set xlabel "bucket cap (MB, log scale) and the buckets it gave" offset 0, -1.2
set ylabel "time (ms per iteration)"
set key top right vertical Left reverse
set bmargin 7.5
buckets(b) = b eq "1" ? "1 bucket" : b . " buckets"

plot datafile using 1:2:3:xtic(sprintf("%g\n%s", $1, buckets(strcol(5)))) with yerrorlines lt 1 \
       title "iteration (±1 stdev)", \
     '' using 1:4 with linespoints lt 2 dt (10, 6) pt 4 title "waiting for gradient buckets"
