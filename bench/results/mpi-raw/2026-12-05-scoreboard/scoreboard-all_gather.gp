set terminal pngcairo size 900,520 font ',11' noenhanced
set output 'bench/results/mpi-raw/2026-12-05-scoreboard/scoreboard-all_gather.png'
set logscale x 2
set format x '%.0b%B'
set xlabel 'message size (bytes, the whole vector)'
set ylabel 'MPI_Allgather time / ddl:auto time (in place)'
set grid
set key top left
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
plot 'bench/results/mpi-raw/2026-12-05-scoreboard/scoreboard-all_gather.dat' index 0 using 1:2 with linespoints linecolor 1 title 'Open MPI, 2 ranks', 'bench/results/mpi-raw/2026-12-05-scoreboard/scoreboard-all_gather.dat' index 1 using 1:2 with linespoints linecolor 2 title 'Open MPI, 4 ranks', 'bench/results/mpi-raw/2026-12-05-scoreboard/scoreboard-all_gather.dat' index 2 using 1:2 with linespoints linecolor 3 title 'Open MPI, 8 ranks', 'bench/results/mpi-raw/2026-12-05-scoreboard/scoreboard-all_gather.dat' index 3 using 1:2 with linespoints linecolor 4 title 'MPICH, 2 ranks'
