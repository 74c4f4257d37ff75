set terminal pngcairo size 900,560
set output "../results/oneccl-n8.png"
set title "all-reduce in place, float32 sum, 8 ranks on 2 cores: time per call (median of runs)"
set termoption noenhanced
set logscale xy
set xlabel "bytes per rank"
set ylabel "microseconds"
set key top left
set format x "%.0s%cB"
set grid
plot "oneccl-n8.dat" using 1:2 with linespoints title "ddl auto (Intel MPI job)", "oneccl-n8.dat" using 1:3 with linespoints title "oneCCL", "oneccl-n8.dat" using 1:4 with linespoints title "Intel MPI MPI_Allreduce", "oneccl-n8.dat" using 1:5 with linespoints title "ddl auto (Open MPI job)", "oneccl-n8.dat" using 1:6 with linespoints title "Open MPI MPI_Allreduce", "oneccl-n8.dat" using 1:7 with linespoints title "Gloo (faster of two)"
