# Figure 16 (bench_cp): the cp exercise against the sequence length. Top, the attention alone:
# left, the bytes a rank holds at the attention's peak (forward and backward), log-log: the naive
# attention's T x T scores, the block attention on one rank, ring attention at CP 2 and CP 4;
# middle, the slowest rank's seconds; right, each rank's CPU seconds at CP 4, balanced against
# contiguous chunks. Bottom, the whole training step of a small GPT-2 (the naive model at one rank,
# cp's trainer at CP 1, 2 and 4): each rank's tensors at the step's peak, its resident set's peak
# in the step, and the step's seconds (slowest rank).
# datafile: index 0, one row per length:
#   length naive_mib naive_ms blocks_mib blocks_ms cp2_mib cp2_ms cp4_mib cp4_ms (NaN: over budget)
# index 1, one row per rank: rank balanced_s contiguous_s
# index 2, one row per length: length, then tensor_mib rss_mib ms for naive, cp1, cp2, cp4
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("cp_scaling.gp")] . "style.gp"
# Two rows of three panels: a larger canvas than style.gp's, the same look.
if (format eq "png") { set terminal pngcairo size 1440,900 font "Liberation Sans,12" background rgb "white" }
if (format eq "pdf") { set terminal pdfcairo size 15in,9.4in font "Liberation Sans,12" }
if (format ne "png" && format ne "pdf") {
  set terminal svg size 1440,900 font "Liberation Sans,12" fontscale 1.3 background rgb "white"
}
set output outfile
set termoption noenhanced

set multiplot layout 2,3 title "Figure 16. Context parallelism (cp): memory and time per rank against the sequence length" font ",14"
set logscale xy 2
set xlabel "sequence length T"
set key top left font ",10"
set title font ",12"
set title "attention: MiB at its peak, per rank"
set yrange [1:8192]  # room above the naive line for the key
plot datafile index 0 using 1:2 with linespoints lt 5 title "naive (T x T scores)", \
     datafile index 0 using 1:4 with linespoints lt 1 title "blocks, 1 rank", \
     datafile index 0 using 1:6 with linespoints lt 2 title "ring, CP 2", \
     datafile index 0 using 1:8 with linespoints lt 3 title "ring, CP 4"
set title "attention: ms, forward + backward (slowest rank)"
set autoscale y
plot datafile index 0 using 1:3 with linespoints lt 5 title "naive", \
     datafile index 0 using 1:5 with linespoints lt 1 title "blocks, 1 rank", \
     datafile index 0 using 1:7 with linespoints lt 2 title "ring, CP 2", \
     datafile index 0 using 1:9 with linespoints lt 3 title "ring, CP 4"
unset logscale
set xlabel "rank (CP 4, the longest T)"
set title "attention: CPU s per rank at CP 4 (balance)"
set key top left font ",10"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set xrange [-0.6:3.6]
plot datafile index 1 using 2:xtic(1) lt 1 title "balanced (r, 2N-1-r)", \
     datafile index 1 using 3 lt 5 title "contiguous (2r, 2r+1)"
set style data linespoints
set autoscale x
set logscale xy 2
set xlabel "sequence length T"
set title "training step: MiB of tensors at its peak, per rank"
set yrange [16:8192]  # room above the lines for the key
plot datafile index 2 using 1:2 lt 5 title "naive GPT-2, 1 rank", \
     datafile index 2 using 1:5 lt 1 title "CP 1 (blocks)", \
     datafile index 2 using 1:8 lt 2 title "CP 2", \
     datafile index 2 using 1:11 lt 3 title "CP 4"
set title "training step: MiB resident (peak in the step), per rank"
set yrange [128:8192]
plot datafile index 2 using 1:3 lt 5 title "naive GPT-2, 1 rank", \
     datafile index 2 using 1:6 lt 1 title "CP 1 (blocks)", \
     datafile index 2 using 1:9 lt 2 title "CP 2", \
     datafile index 2 using 1:12 lt 3 title "CP 4"
set title "training step: ms (slowest rank)"
set yrange [32:131072]
plot datafile index 2 using 1:4 lt 5 title "naive GPT-2, 1 rank", \
     datafile index 2 using 1:7 lt 1 title "CP 1 (blocks)", \
     datafile index 2 using 1:10 lt 2 title "CP 2", \
     datafile index 2 using 1:13 lt 3 title "CP 4"
unset multiplot
