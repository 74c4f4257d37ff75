#!/usr/bin/env bash
# Re-runs every ddl-sim figure in bench/results/paper-reproduction.md.
# usage: bench/tools/paper_sims.sh [build dir]   (writes bench/results/paper/)
set -euo pipefail
cd "$(dirname "$0")/../.."
sim=${1:-build/release}/bench/ddl-sim
out=bench/results/paper
mkdir -p "$out"
for preset in paper paper-node-links; do
  for bytes in 350e6 100e6; do
    "$sim" --preset $preset --bytes $bytes --strategy all --csv "$out/$preset-$bytes.csv" > "$out/$preset-$bytes.txt"
  done
  for model in resnet50 resnet50-caffe resnet101-22k; do
    "$sim" --preset $preset --scaling --model $model --max-gpus 4096 \
      --csv "$out/scaling-$preset-$model.csv" --plot "$out/scaling-$preset-$model.png" > "$out/scaling-$preset-$model.txt"
  done
done
# The GPUs' network ports beside NVLink, not through it (the node level's links private)
for bytes in 350e6 100e6; do
  "$sim" --preset paper-ports --bytes $bytes --strategy all --csv "$out/paper-ports-$bytes.csv" > "$out/paper-ports-$bytes.txt"
done
# FAIR's 32 DGX-1 (8 P100 each, NVLink ~20 GB/s; 4 EDR ports per node ~10 GB/s each, shared by 8 GPUs)
"$sim" --topology 8:20GB/s:3us,32:10GB/s:5us:4 --bytes 100e6 --strategy all > "$out/dgx1-256-100e6.txt"
"$sim" --topology 8:20GB/s:3us --bytes 100e6 --strategy all > "$out/dgx1-8-100e6.txt"
# The nodes' GPUs as shared memory (NVLink peer reads): the direct strategies weighed inside a node
"$sim" --preset paper --shared-levels 1 --bytes 350e6 --strategy all > "$out/shared-levels-paper-350e6.txt"
{
  for bytes in 4K 256K 4M 64M; do "$sim" --topology 4:20GB/s:3us --shared-levels 1 --bytes $bytes --strategy all; done
  for bytes in 4M 64M; do "$sim" --topology 8:20GB/s:3us --shared-levels 1 --bytes $bytes --strategy all; done
} > "$out/shared-levels-node-4gpu.txt"
# Scale: 1024 and 4096 ranks x 350 MB, every multi-ring candidate (wall time and peak memory per run)
/usr/bin/time -v "$sim" --topology 4:20GB/s:3us,16:10GB/s:5us,16:9.5GB/s:8us --bytes 350e6 --strategy multi_ring \
  > "$out/scale-1024.txt" 2> "$out/scale-1024.time"
/usr/bin/time -v "$sim" --topology 4:20GB/s:3us,16:10GB/s:5us,64:9.5GB/s:8us --bytes 350e6 --strategy multi_ring \
  > "$out/scale-4096.txt" 2> "$out/scale-4096.time"
