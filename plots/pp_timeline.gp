# Figure 10: one training step of the pipeline across ranks under GPipe (top) and 1F1B (bottom):
# a row per stage rank, a box per action (forward blue, backward orange) labelled with its
# micro-batch, on the clock the ranks share, both on the same time axis.
# datafile: index 0 GPipe, index 1 1F1B, one row per action:
#   stage  start_ms  end_ms  micro  pass (0 forward, 1 backward)
# Variables: datafile, outfile, provenance, stages, span (ms), run, [format].
load ARG0[1:strlen(ARG0) - strlen("pp_timeline.gp")] . "style.gp"

set multiplot layout 2,1 title "One step through " . run font ",15"
set xlabel "milliseconds since the step's first action"
set ylabel "stage rank"
set yrange [stages - 0.5 : -0.5]
set ytics 1 format "%g"
unset mytics
set xrange [0:span * 1.02]
set style fill solid 0.8 border rgb "#333333"
set key outside top center horizontal
do for [i = 0:1] {
  set title (i == 0 ? "GPipe: every forward, then every backward" : "1F1B: warm-up, one forward and one backward, cool-down")
  plot datafile index i using (($2 + $3) / 2):($5 == 0 ? $1 : 1/0):(($3 - $2) / 2):(0.35) with boxxyerror \
         lc rgb "#0072B2" title "forward", \
       datafile index i using (($2 + $3) / 2):($5 == 1 ? $1 : 1/0):(($3 - $2) / 2):(0.35) with boxxyerror \
         lc rgb "#E69F00" title "backward", \
       datafile index i using (($2 + $3) / 2):1:(sprintf("%d", $4)) with labels font ",9" textcolor rgb "white" \
         notitle
}
unset multiplot
