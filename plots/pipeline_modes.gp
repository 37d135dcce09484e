# Figure 7: the pipeline exercise's timing runs. Left: milliseconds per step of each mode (single
# stage, model parallel, pipeline at 2, 4, 8 micro-batches). Middle: the bubble measured from the
# stages' timelines against GPipe's (n-1)/(m+n-1). Right: the most bytes of activations each
# stage held at once, against the number of micro-batches.
# datafile: index 0, one row per mode: position  label  ms_per_step  tokens_per_second
#           index 1, one row per micro-batch count (1 = model parallel):
#             m  measured_bubble  ideal_bubble  stage0_peak_MB  stage1_peak_MB
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("pipeline_modes.gp")] . "style.gp"

set multiplot layout 1,3 title "GPT-2 pipeline parallel (pipeline): modes, bubble, activation memory" font ",15"

set title "Time per step"
set ylabel "ms per step"
set yrange [0:*]
set xrange [-0.6:4.6]
set style fill solid 0.75 border -1
set boxwidth 0.6
set xtics rotate by 35 right
unset key
plot datafile index 0 using 1:3:xtic(2) with boxes lt 1, \
     datafile index 0 using 1:3:(sprintf("%.0f", $3)) with labels offset 0, 0.7 font ",10" notitle

unset label 100
set xtics norotate
set title "Bubble: idle share of the stages"
set xlabel "micro-batches m (log scale)"
set ylabel "fraction of stage time idle"
set logscale x 2
set xrange [0.75:11]
set xtics 2 format "%g"
set yrange [0:1]
set key top right
plot datafile index 1 using 1:2 with linespoints lt 1 title "measured", \
     datafile index 1 using 1:3 with linespoints lt 2 dt (10, 6) title "GPipe: (n-1)/(m+n-1)"

set title "Peak activations held"
set ylabel "MB (recorded stage inputs and outputs)"
set yrange [0:*]
set key top left
plot datafile index 1 using 1:4 with linespoints lt 3 title "stage 0", \
     datafile index 1 using 1:5 with linespoints lt 4 title "stage 1"
unset multiplot
