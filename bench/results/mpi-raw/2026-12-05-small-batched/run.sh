#!/usr/bin/env bash
# The scoreboard's small cells (8-512 B) back to back: 16 calls a sample between the barriers
# (--batch 16), 40 samples a size, every collective, Open MPI (tuned) 2/4/8 ranks and MPICH 2 ranks,
# 3 runs: what a call costs when the barrier's exit is not most of the sample.
#   bench/results/mpi-raw/2026-12-05-small-batched/run.sh BUILD BUILD_MPICH
set -euo pipefail
here=$(dirname "$0")
COLLECTIVES="all_reduce reduce_scatter all_gather broadcast" MAX=512 MPICH_RANKS=2 ITERATIONS=40 WARMUP=10 BATCH=16 \
  bench/tools/collective_sweeps.sh "$here" "$1" "$2"
bench/tools/collective_table.py "$here" > "$here/summary.txt"
