# Figure 2: training loss per step, the reference run (wide grey line) under each data-parallel
# run (markers of decreasing size, so curves that coincide all stay visible); lower panel: each
# run's loss minus the reference loss.
# datafile: step, then one column per run (reference first); ? where a run has no such step.
# Variables: datafile, outfile, provenance, titles (a word list, reference first, e.g.
#   '"reference (1 rank)" "task2a (4 ranks)"'), maxdiff (largest |loss - reference|), [format].
load ARG0[1:strlen(ARG0) - strlen("losses.gp")] . "style.gp"
n = words(titles)
set datafile missing "?"
size(i) = 2.0 - 1.2 * (i - 2) / (n > 2 ? n - 2 : 1)   # run i's marker size, 2.0 down to 0.8
pts = "6 4 2 1 12 8"                                  # open circle, open square, x, +, ...

set multiplot
set lmargin at screen 0.1
set rmargin at screen 0.76
set key outside right top vertical Left reverse
stats datafile using 1 nooutput
set xrange [STATS_min - 1 : STATS_max + 1]

set tmargin at screen 0.91
set bmargin at screen 0.42
set title "Training loss per step: data-parallel runs vs the single-process reference"
set ylabel "training loss"
set format x ""
plot datafile using 1:2 with lines lw 9 lc rgb "#c8c8c8" title word(titles, 1), \
     for [i=2:n] datafile using 1:(column(i + 1)) with points lt (i - 1) \
       pt int(word(pts, (i - 2) % 6 + 1)) ps size(i) lw 1.5 title word(titles, i)

unset label 100
unset title
unset key
set tmargin at screen 0.39
set bmargin at screen 0.14
set format x "%g"
set xlabel "training step"
e = maxdiff > 0 ? floor(log10(maxdiff)) : -7
scale = 10.0 ** e
lim = maxdiff > 0 ? 1.4 * maxdiff / scale : 1
set yrange [-lim:lim]
set ylabel sprintf("loss − reference (×1e%d)", e)
set ytics format "%g"
plot for [i=2:n] datafile using 1:((column(i + 1) - $2) / scale) with points lt (i - 1) \
       pt int(word(pts, (i - 2) % 6 + 1)) ps size(i) lw 1.5 notitle, \
     0 with lines lw 2 lc rgb "#c8c8c8" notitle
unset multiplot
