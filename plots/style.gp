# The look every dtlab figure shares; each template loads it first (see README.md).
# Expects outfile and provenance (a string); format: 'svg' (the default), 'png' or 'pdf'.
if (!exists("format")) format = "svg"
set encoding utf8
if (format eq "png") {
  set terminal pngcairo size 960,600 font "Liberation Sans,12" background rgb "white"
}
if (format eq "pdf") {
  set terminal pdfcairo size 10in,6.25in font "Liberation Sans,12"
}
if (format ne "png" && format ne "pdf") {
  # svg font sizes are pixels, cairo's points: scaled so that both read alike.
  set terminal svg size 960,600 font "Liberation Sans,12" fontscale 1.3 background rgb "white"
}
# Run names and paths contain _ and ^: print every string as it is.
set termoption noenhanced
set output outfile

set border 3 lw 1 lc rgb "#555555"
set tics nomirror out scale 0.6 textcolor rgb "#333333"
set style line 100 lc rgb "#dcdcdc" lw 1
set style line 101 lc rgb "#f0f0f0" lw 1
set grid back ls 100, ls 101
set title font ",15"
set key box lc rgb "#cccccc" opaque samplen 2.5 spacing 1.2 width 1

# Okabe-Ito colours (distinct with colour blindness too), each with its own point type, so
# overlapping series stay visible and tell apart in grey as well.
set linetype 1 lc rgb "#0072B2" lw 2 pt 7 ps 1.0    # blue, filled circle
set linetype 2 lc rgb "#E69F00" lw 2 pt 5 ps 0.9    # orange, filled square
set linetype 3 lc rgb "#009E73" lw 2 pt 9 ps 1.2    # green, filled triangle
set linetype 4 lc rgb "#CC79A7" lw 2 pt 13 ps 1.2   # purple, filled diamond
set linetype 5 lc rgb "#D55E00" lw 2 pt 11 ps 1.2   # vermilion, filled triangle down
set linetype 6 lc rgb "#56B4E9" lw 2 pt 15 ps 1.2   # sky blue, filled pentagon
set linetype cycle 6
open_pt = "6 4 8 12 10 14"   # the open twin of each linetype's point

# Provenance: a small grey footer in every image.
set label 100 provenance at screen 0.012, screen 0.022 left font ",9" textcolor rgb "#666666"
set bmargin 6
