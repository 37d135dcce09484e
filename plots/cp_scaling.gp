# Figure 16 (bench_cp): the cp exercise's attention against the sequence length. Left: the bytes a
# rank holds at the attention's peak (forward and backward), log-log: the naive attention's T x T
# scores, the block attention on one rank, ring attention at CP 2 and CP 4; middle: the slowest
# rank's seconds; right: each rank's CPU seconds at CP 4, balanced against contiguous chunks.
# datafile: index 0, one row per length:
#   length naive_mib naive_ms blocks_mib blocks_ms cp2_mib cp2_ms cp4_mib cp4_ms (NaN: over budget)
# index 1, one row per rank: rank balanced_s contiguous_s
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("cp_scaling.gp")] . "style.gp"

set multiplot layout 1,3 title "Figure 16. Context parallelism (cp): attention's memory and time per rank" font ",14"
set logscale xy 2
set xlabel "sequence length T"
set key top left font ",10"
set title font ",12"
set title "MiB at the attention's peak, per rank"
set yrange [1:8192]  # room above the naive line for the key
plot datafile index 0 using 1:2 with linespoints lt 5 title "naive (T x T scores)", \
     datafile index 0 using 1:4 with linespoints lt 1 title "blocks, 1 rank", \
     datafile index 0 using 1:6 with linespoints lt 2 title "ring, CP 2", \
     datafile index 0 using 1:8 with linespoints lt 3 title "ring, CP 4"
set title "ms, forward + backward (slowest rank)"
set autoscale y
plot datafile index 0 using 1:3 with linespoints lt 5 title "naive", \
     datafile index 0 using 1:5 with linespoints lt 1 title "blocks, 1 rank", \
     datafile index 0 using 1:7 with linespoints lt 2 title "ring, CP 2", \
     datafile index 0 using 1:9 with linespoints lt 3 title "ring, CP 4"
unset logscale
set xlabel "rank (CP 4, the longest T)"
set title "CPU s per rank at CP 4: balance"
set key top left font ",10"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set xrange [-0.6:3.6]
plot datafile index 1 using 2:xtic(1) lt 1 title "balanced (r, 2N-1-r)", \
     datafile index 1 using 3 lt 5 title "contiguous (2r, 2r+1)"
unset multiplot
