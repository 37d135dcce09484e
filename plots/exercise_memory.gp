# Figure 19: memory per rank of every exercise, one bar a rank of each exercise's run of the most
# ranks. Above: the rank's CPU tensors at its steps' peak, stacked: parameters, gradients,
# optimiser state, the rest. Below: its peak resident set in the steps, split at what it held
# after start-up.
# datafile: one row per rank (a blank position between exercises):
#   position "label" parameters gradients optimiser rest tensors_peak rss_startup rss_steps_peak
#   (MB; NaN: not measured)
# Variables: datafile, outfile, provenance, xmax, [format].
load ARG0[1:strlen(ARG0) - strlen("exercise_memory.gp")] . "style.gp"

# A part not measured (NaN) adds nothing to the stack: where the gradients were not measured they
# are among the rest.
v(c) = valid(c) ? column(c) : 0
set multiplot layout 2,1 title "Memory per rank of every exercise" font ",15"
set xrange [-0.8:xmax + 0.8]
set style fill solid 0.8 border -1
set boxwidth 0.7
set key top left font ",10" horizontal
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # room for the key above the tallest bar

set format x ""
set xtics scale 0
set ylabel "tensors at the peak, MB"
plot datafile using 1:(v(3) + v(4) + v(5) + v(6)) with boxes lt 4 title "the rest at the peak", \
     datafile using 1:(v(3) + v(4) + v(5)) with boxes lt 3 title "optimiser state", \
     datafile using 1:(v(3) + v(4)) with boxes lt 2 title "gradients", \
     datafile using 1:(v(3)) with boxes lt 1 title "parameters"

set format x "%g"
set xtics rotate by 45 right font ",9"
set ylabel "resident in the steps, MB"
plot datafile using 1:9:xtic(2) with boxes lt 5 title "peak in the steps", \
     datafile using 1:8 with boxes lt 6 title "after start-up"
unset multiplot
