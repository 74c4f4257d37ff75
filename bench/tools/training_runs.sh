#!/usr/bin/env bash
# Re-runs every figure in bench/results/training-fashion-mnist.md: ddl-train
# (MLP, CNN) and ddl-train-libtorch (CNN) on Fashion-MNIST for 10 epochs at
# 1, 2, 4 and 8 ranks as threads, and over Open MPI at 1, 2 and 4 ranks, the
# same global batch (64) and seed everywhere; then plots with gnuplot.
# usage: bench/tools/training_runs.sh [build dir]   (writes bench/results/training/)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
out=bench/results/training
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpiexec --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader)
run() {  # name, command...
  local name=$1; shift
  { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; "$@" --csv "$out/$name.csv"; } \
    > "$out/$name.txt" 2>&1
  echo "$name: $(tail -n 1 "$out/$name.txt")"
}
for n in 1 2 4 8; do
  run mlp-threads-n$n "$build/examples/ddl-train" --model mlp --ranks $n --epochs 10
  run libtorch-threads-n$n "$build/examples/ddl-train-libtorch" --ranks $n --epochs 10
  run cnn-threads-n$n "$build/examples/ddl-train" --model cnn --ranks $n --epochs 10
done
for n in 1 2 4; do
  run mlp-mpi-n$n "${mpirun[@]}" -n $n "$build/examples/ddl-train" --transport mpi --model mlp --epochs 10
  run libtorch-mpi-n$n "${mpirun[@]}" -n $n "$build/examples/ddl-train-libtorch" --transport mpi --epochs 10
done
bench/tools/plot_training.sh "$out"
