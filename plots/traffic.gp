# Figure 3: bytes sent by this host's ranks at each global batch size, expected (light) next to
# measured (dark), with measured / expected above each pair.
# datafile: global_batch_size  iterations  expected_MB  measured_MB  ratio_measured_to_expected
# Variables: datafile, outfile, provenance, [format].
load ARG0[1:strlen(ARG0) - strlen("traffic.gp")] . "style.gp"

stats datafile using (($3 > $4) ? $3 : $4) nooutput
set yrange [0 : STATS_max * 1.18]
set xrange [-0.6 : STATS_records - 0.4]
set title "Gradient traffic: expected vs measured bytes sent"
set xlabel "global batch size (examples per step) and steps measured" offset 0, -1.2
set ylabel "data sent (MB, 10⁶ bytes)"
set grid noxtics
set bmargin 7.5
set xtics scale 0
set key top left vertical Left reverse
set boxwidth 0.36
set style fill solid border lc rgb "#555555"

plot datafile using ($0 - 0.19):3 with boxes lt 1 fs solid 0.35 title "expected", \
     '' using ($0 + 0.19):4 with boxes lt 1 fs solid 0.9 title "measured (interface tx counter)", \
     '' using 0:((($3 > $4) ? $3 : $4)):(sprintf("measured ×%.4f", $5)):xtic(sprintf("%d\n%d steps", $1, $2)) \
       with labels offset 0, 1 font ",11" notitle
