# Figure 8: one training step of the pipeline as its stages ran it: a row per stage, a box per
# task (forward blue, backward orange) labelled with its micro-batch, so the fill, the steady
# state and the drain can be seen.
# datafile: stage  start_ms  end_ms  micro  pass (0 forward, 1 backward)
# Variables: datafile, outfile, provenance, stages, run, [format].
load ARG0[1:strlen(ARG0) - strlen("pipeline_timeline.gp")] . "style.gp"

set title "One step through the pipeline: " . run
set xlabel "milliseconds since the step's first task"
set ylabel "stage"
set yrange [stages - 0.5 : -0.5]
set ytics 1 format "%g"
unset mytics
set xrange [0:*]
set style fill solid 0.8 border rgb "#333333"
set key outside top center horizontal
plot datafile using (($2 + $3) / 2):($5 == 0 ? $1 : 1/0):(($3 - $2) / 2):(0.35) with boxxyerror lc rgb "#0072B2" \
       title "forward", \
     datafile using (($2 + $3) / 2):($5 == 1 ? $1 : 1/0):(($3 - $2) / 2):(0.35) with boxxyerror lc rgb "#E69F00" \
       title "backward", \
     datafile using (($2 + $3) / 2):1:(sprintf("%d", $4)) with labels font ",10" textcolor rgb "white" notitle
