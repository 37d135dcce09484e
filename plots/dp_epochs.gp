# Figure 6: the dp exercise's learning run, per epoch: validation loss (left axis) and BLEU of
# greedy translations of the test pairs (right axis).
# datafile: epoch  validation_loss  bleu
# Variables: datafile, outfile, provenance, run (the run's title), [format].
load ARG0[1:strlen(ARG0) - strlen("dp_epochs.gp")] . "style.gp"

stats datafile using 1 nooutput
set xrange [STATS_min - 0.3 : STATS_max + 0.3]
set xtics 1 format "%g"
unset mxtics
set title "Validation loss and BLEU per epoch: " . run
set xlabel "epoch"
set ylabel "validation loss (target tokens)"
set y2label "BLEU"
set yrange [0:*]
set y2range [0:100]
set ytics nomirror
set y2tics
set key top center horizontal Left reverse width 2
plot datafile using 1:2 with linespoints lt 1 axes x1y1 title "validation loss", \
     datafile using 1:3 with linespoints lt 2 axes x1y2 title "BLEU"
