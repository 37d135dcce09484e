# Figure 18 (bench_precision): the precision exercise. Left, what a step's forward keeps for
# backward at one rank (fp32), against the number of blocks, with no block checkpointed, every
# block and every second block (solid), beside the tensors at the step's peak (dashed: the model,
# its gradients and AdamW's state included); middle, the step's milliseconds, the mean (solid) and
# the fastest step (dashed), the recompute's price; right, the losses at 2 ranks in fp32, bf16 (a compute copy of fp32 masters), fp16
# gradients with the dynamic loss scaler and fp16 gradients unscaled.
# datafile: index 0, one row per number of blocks:
#   n_layer, then kept_mib peak_mib ms forwards fastest_ms for no checkpointing, every block, every
#   2nd block (columns 2-6, 7-11, 12-16)
# index 1, one row per step: step fp32 bf16 fp16 fp16_none (the loss; NaN: no such step)
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("precision.gp")] . "style.gp"
# One row of three panels: a wider canvas than style.gp's, the same look.
if (format eq "png") { set terminal pngcairo size 1440,560 font "Liberation Sans,12" background rgb "white" }
if (format eq "pdf") { set terminal pdfcairo size 15in,5.8in font "Liberation Sans,12" }
if (format ne "png" && format ne "pdf") {
  set terminal svg size 1440,560 font "Liberation Sans,12" fontscale 1.3 background rgb "white"
}
set output outfile
set termoption noenhanced

set multiplot layout 1,3 title "Figure 18. Memory and precision (precision): checkpointing's bytes and time, and the losses of each precision" font ",14"
set title font ",12"
set key top left font ",10"
set logscale x 2
set xlabel "GPT-2 blocks (n_layer)"
# The tics at the measured depths; a margin left and right of them.
set offsets graph 0.06, graph 0.06, 0, 0
set title "MiB kept by the forward (solid) and at the step's peak (dashed)"
set yrange [0:*]
plot datafile index 0 using 1:2:xtic(1) with linespoints lt 1 title "no checkpointing", \
     datafile index 0 using 1:7 with linespoints lt 2 title "every block", \
     datafile index 0 using 1:12 with linespoints lt 3 title "every 2nd block", \
     datafile index 0 using 1:3 with linespoints lt 1 dt 2 pt 6 notitle, \
     datafile index 0 using 1:8 with linespoints lt 2 dt 2 pt 4 notitle, \
     datafile index 0 using 1:13 with linespoints lt 3 dt 2 pt 8 notitle
set title "ms a step, the mean (solid) and the fastest (dashed)"
plot datafile index 0 using 1:4:xtic(1) with linespoints lt 1 title "no checkpointing", \
     datafile index 0 using 1:9 with linespoints lt 2 title "every block", \
     datafile index 0 using 1:14 with linespoints lt 3 title "every 2nd block", \
     datafile index 0 using 1:6 with linespoints lt 1 dt 2 pt 6 notitle, \
     datafile index 0 using 1:11 with linespoints lt 2 dt 2 pt 4 notitle, \
     datafile index 0 using 1:16 with linespoints lt 3 dt 2 pt 8 notitle
unset logscale x
set offsets 0, 0, 0, 0
set xtics autofreq
set xlabel "step"
set title "loss (2 ranks, no checkpointing)"
set key top right font ",10"
set autoscale y
plot datafile index 1 using 1:2 with lines lt 1 title "fp32", \
     datafile index 1 using 1:3 with lines lt 2 title "bf16 compute, fp32 masters", \
     datafile index 1 using 1:4 with lines lt 3 dt 2 title "fp16 gradients, dynamic scaler", \
     datafile index 1 using 1:5 with lines lt 5 dt 3 title "fp16 gradients, unscaled"
unset multiplot
