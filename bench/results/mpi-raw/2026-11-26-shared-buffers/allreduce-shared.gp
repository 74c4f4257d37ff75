set terminal pngcairo size 900,520 font ',11' noenhanced
set output 'allreduce-shared.png'
set logscale x 2
set format x '%.0b%B'
set xlabel 'message size (bytes per rank)'
set ylabel 'MPI_Allreduce time / ddl auto time (in place)'
set grid
set key top left
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
plot 'allreduce-shared.dat' index 0 using 1:2 with linespoints linecolor 1 dashtype 1 pointtype 7 title '2 ranks, shared buffers', 'allreduce-shared.dat' index 1 using 1:2 with linespoints linecolor 1 dashtype 2 pointtype 6 title '2 ranks, plain', 'allreduce-shared.dat' index 2 using 1:2 with linespoints linecolor 2 dashtype 1 pointtype 7 title '4 ranks, shared buffers', 'allreduce-shared.dat' index 3 using 1:2 with linespoints linecolor 2 dashtype 2 pointtype 6 title '4 ranks, plain', 'allreduce-shared.dat' index 4 using 1:2 with linespoints linecolor 3 dashtype 1 pointtype 7 title '8 ranks, shared buffers', 'allreduce-shared.dat' index 5 using 1:2 with linespoints linecolor 3 dashtype 2 pointtype 6 title '8 ranks, plain', 'allreduce-shared.dat' index 6 using 1:2 with linespoints linecolor 4 dashtype 1 pointtype 7 title 'MPICH 2 ranks, shared buffers', 'allreduce-shared.dat' index 7 using 1:2 with linespoints linecolor 4 dashtype 2 pointtype 6 title 'MPICH 2 ranks, plain'
