#!/usr/bin/env bash
# Plots bench/results/training/*.csv (from training_runs.sh or ddl-train --csv):
# per model and transport, test accuracy and train loss against epoch and
# against wall time, one line per rank count.
# usage: bench/tools/plot_training.sh [dir]
set -euo pipefail
dir=${1:-bench/results/training}
command -v gnuplot >/dev/null || { echo "plot_training.sh: gnuplot not found (apt-get install gnuplot-nox)"; exit 1; }
for series in mlp-threads cnn-threads libtorch-threads mlp-mpi libtorch-mpi; do
  files=$(ls "$dir"/$series-n*.csv 2>/dev/null | sort -V) || true
  [ -n "$files" ] || continue
  for x in epoch wall; do
    col=5; label=epoch
    [ $x = wall ] && col=6 && label='wall time (s)'
    acc="" loss=""
    for f in $files; do
      n=$(basename "$f" .csv); n=${n##*-n}
      acc+="'$f' using $col:(\$8*100) skip 1 with linespoints title '$n rank(s)', "
      loss+="'$f' using $col:7 skip 1 with linespoints title '$n rank(s)', "
    done
    gnuplot <<GP
set terminal pngcairo size 1200,450 font ',10'
set output '$dir/$series-$x.png'
set datafile separator ','
set grid
set key bottom right
set multiplot layout 1,2 title 'ddl-train on Fashion-MNIST: $series, global batch 64, 10 epochs'
set xlabel '$label'
set ylabel 'test accuracy (%)'
plot ${acc%, }
set key top right
set ylabel 'train loss'
plot ${loss%, }
unset multiplot
GP
  done
done
echo "plots in $dir"
