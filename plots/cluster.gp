# Figure 9: tasks 2a, 2b and 3 on an emulated cluster (scripts/cluster_demo.sh: network-namespace
# hosts whose links are rate-limited in both directions). Left: seconds per step against the link
# rate, with the share spent waiting for gradients. Right: that waiting time against what the
# bytes and the link predict: gather/scatter through rank 0 moves 2(n-1)S through rank 0's link,
# the ring 2(n-1)/n S through every rank's.
# datafile: one block per task (index 0 task2a, 1 task2b, 2 task3), rows by rate:
#   gbit_per_s  seconds_per_step  waiting_seconds  predicted_seconds
# Variables: datafile, outfile, provenance, world, [format].
load ARG0[1:strlen(ARG0) - strlen("cluster.gp")] . "style.gp"

set multiplot layout 1,2 title sprintf("Tasks 2a, 2b, 3 on %d emulated hosts: the network decides", world) font ",15"
set logscale xy
set xlabel "link rate per host, each direction (Gbit/s; log scale)"
set format x "%g"
set format y "%g"
set xrange [0.8:13]
set key top right

set title "Time per step"
set ylabel "seconds per step (log scale)"
plot datafile index 0 using 1:2 with linespoints lt 1 title "task 2a: gather/scatter", \
     datafile index 1 using 1:2 with linespoints lt 2 title "task 2b: all_reduce (ring)", \
     datafile index 2 using 1:2 with linespoints lt 3 title "task 3: DDP (overlapped)"

unset label 100
set key bottom left
set yrange [0.02:20]
set title "Waiting for gradients: measured and predicted"
set ylabel "seconds per step (log scale)"
plot datafile index 0 using 1:3 with points lt 1 title "2a measured", \
     datafile index 0 using 1:4 with lines lt 1 dt (10, 6) title "2a: 2(n-1)S / rate", \
     datafile index 1 using 1:3 with points lt 2 title "2b measured", \
     datafile index 1 using 1:4 with lines lt 2 dt (10, 6) title "2b: 2(n-1)/n S / rate", \
     datafile index 2 using 1:3 with points lt 3 title "3 measured (not hidden by backward)"
unset multiplot
