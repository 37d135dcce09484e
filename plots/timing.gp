# Figure 1: time per iteration against the number of ranks, one colour per exercise. Solid with
# error bars (±1 stdev): the whole iteration; dashed, same colour, open points: the part spent
# waiting for gradient communication.
# datafile: one block (index) per exercise, in the order of `series`:
#   ranks  ms_per_iteration  stdev_ms  comm_ms  tokens_per_second
# Variables: datafile, outfile, provenance, series (e.g. 'task2a task2b task3'), [format].
load ARG0[1:strlen(ARG0) - strlen("timing.gp")] . "style.gp"
n = words(series)

stats datafile using 1 nooutput
set logscale x 2
set xrange [STATS_min / 1.3 : STATS_max * 1.3]
set xtics 2 format "%g"
unset mxtics
set yrange [0:*]
set title "Time per training iteration vs number of ranks (one machine, loopback: not a cluster)"
set xlabel "ranks (processes; log scale)"
set ylabel "time per iteration (ms)"
set key outside right top vertical Left reverse

# Spread the series a little sideways so their error bars do not hide each other.
shift(i) = 2 ** (0.035 * (i - (n + 1) / 2.0))
plot for [i=1:n] datafile index (i - 1) using ($1 * shift(i)):2:3 with yerrorlines lt i \
       title word(series, i) . ": whole iteration", \
     for [i=1:n] datafile index (i - 1) using ($1 * shift(i)):4 with linespoints lt i dt (10, 6) \
       pt int(word(open_pt, (i - 1) % 6 + 1)) title word(series, i) . ": communication"
