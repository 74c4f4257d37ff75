set terminal pngcairo size 900,520 font ',11' noenhanced
set output 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.png'
set logscale x 2
set format x '%.0b%B'
set xlabel 'message size (bytes per rank)'
set ylabel 'MPI_Allreduce time / ddl auto time (in place)'
set grid
set key top left
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
plot 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 0 using 1:2 with linespoints linecolor 1 dashtype 1 pointtype 7 title '2 ranks, stages', 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 1 using 1:2 with linespoints linecolor 1 dashtype 2 pointtype 6 title '2 ranks, without', 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 2 using 1:2 with linespoints linecolor 2 dashtype 1 pointtype 7 title '4 ranks, stages', 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 3 using 1:2 with linespoints linecolor 2 dashtype 2 pointtype 6 title '4 ranks, without', 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 4 using 1:2 with linespoints linecolor 3 dashtype 1 pointtype 7 title '8 ranks, stages', 'bench/results/mpi-raw/2026-11-25-stages/allreduce-stages.dat' index 5 using 1:2 with linespoints linecolor 3 dashtype 2 pointtype 6 title '8 ranks, without'
