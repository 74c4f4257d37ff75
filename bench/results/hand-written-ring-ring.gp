set terminal pngcairo size 900,520 font ',11' noenhanced
set output '../../hand-written-ring-ring.png'
set logscale x 2
set format x '%.0b%B'
set xlabel 'message size (bytes per rank)'
set ylabel 'hand:ring time / ddl:ring time (in place)'
set grid
set key top left
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
plot '../../hand-written-ring-ring.dat' index 0 using 1:2 with linespoints linecolor 1 title 'threads, 2 ranks', '../../hand-written-ring-ring.dat' index 1 using 1:2 with linespoints linecolor 2 title 'threads, 4 ranks', '../../hand-written-ring-ring.dat' index 2 using 1:2 with linespoints linecolor 3 title 'threads, 8 ranks', '../../hand-written-ring-ring.dat' index 3 using 1:2 with linespoints linecolor 4 title 'Open MPI, 2 ranks', '../../hand-written-ring-ring.dat' index 4 using 1:2 with linespoints linecolor 5 title 'Open MPI, 4 ranks', '../../hand-written-ring-ring.dat' index 5 using 1:2 with linespoints linecolor 6 title 'Open MPI, 8 ranks'
