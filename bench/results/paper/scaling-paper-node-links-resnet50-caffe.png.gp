set terminal pngcairo size 900,420 font ',10'
set output 'bench/results/paper/scaling-paper-node-links-resnet50-caffe.png'
set datafile separator ','
set key top left
set logscale x 2
set grid
set multiplot layout 1,2 title 'ResNet-50 1K, IBM-Caffe, batch 32/GPU on the paper-node-links network (ddl-sim)'
set xlabel 'GPUs'
set ylabel 'speed-up'
set logscale y 2
plot 'bench/results/paper/scaling-paper-node-links-resnet50-caffe.csv' skip 1 u 1:1 w l dt 2 lc 'gray' t 'linear', '' skip 1 u 1:6 w lp t 'no overlap', '' skip 1 u 1:8 w lp t 'overlap (buckets)'
unset logscale y
set ylabel 'scaling efficiency'
set yrange [0.5:1.02]
set key bottom left
plot 'bench/results/paper/scaling-paper-node-links-resnet50-caffe.csv' skip 1 u 1:5 w lp lc 1 t 'no overlap (vs 1 GPU)', '' skip 1 u 1:7 w lp lc 2 t 'overlap (vs 1 GPU)', '' skip 1 u 1:9 w lp dt 2 lc 1 t 'no overlap (vs 4 GPUs)', '' skip 1 u 1:10 w lp dt 2 lc 2 t 'overlap (vs 4 GPUs)'
unset multiplot
