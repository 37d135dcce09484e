# Figure 13: the zero exercise's scaling runs. One panel per world size: rank 0's bytes at each
# stage (the kit's replicated baseline, ZeRO-1, ZeRO-2 and FSDP, all measured; DDP from the memory
# model where a grading has no baseline run), stacked: parameters,
# gradients, AdamW's moments, and the rest of every tensor alive at the step's peak; a mark at the
# memory model's sum of the first three.
# datafile: one index per world size (in the order of `worlds`), one row per stage:
#   position  label  parameters_MB  gradients_MB  adamw_MB  rest_MB (NaN: not measured)  model_MB
# Variables: datafile, outfile, provenance, worlds (e.g. "1 2 4"), ymax, [format].
load ARG0[1:strlen(ARG0) - strlen("zero_memory.gp")] . "style.gp"

n = words(worlds)
set multiplot layout 1,n title "Sharding (zero): what rank 0 holds at each stage" font ",15"
set yrange [0:ymax]
set xrange [-0.6:3.6]
set style fill solid 0.8 border -1
set boxwidth 0.62
set xtics rotate by 30 right
rest(c) = (column(c) == column(c)) ? column(c) : 0
do for [i = 1:n] {
  w = word(worlds, i)
  set title sprintf("%s rank%s", w, (w eq "1") ? "" : "s")
  if (i == 1) { set ylabel "MB (rank 0)" } else { unset ylabel }
  # The key in the last panel, whose bars are the lowest.
  if (i == n) { set key top right font ",10" width -2 } else { unset key }
  plot datafile index (i - 1) using 1:($3 + $4 + $5 + rest(6)):xtic(2) with boxes lt 4 title "rest at the peak", \
       datafile index (i - 1) using 1:($3 + $4 + $5) with boxes lt 3 title "AdamW", \
       datafile index (i - 1) using 1:($3 + $4) with boxes lt 2 title "gradients", \
       datafile index (i - 1) using 1:3 with boxes lt 1 title "parameters", \
       datafile index (i - 1) using 1:7 with points pt 9 ps 1.6 lc rgb "#000000" title "memory model"
}
unset multiplot
