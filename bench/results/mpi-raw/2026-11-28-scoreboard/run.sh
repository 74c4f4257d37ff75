#!/usr/bin/env bash
# Issue 21's scoreboard: every collective against its MPI call, Open MPI (tuned
# malloc) at 2, 4, 8 ranks and MPICH at 2, 3 runs each, from the repository root:
#   bench/results/mpi-raw/2026-11-28-scoreboard/run.sh BUILD BUILD_MPICH
# 1. 8 B-16 MiB, 5 timed iterations a size (the recorded sweeps' settings) -> this folder
# 2. 8 B-4 KiB again with 40 timed iterations a size (µs-scale times) -> small/
# Tables: bench/tools/collective_table.py DIR (-> summary.txt, small/summary.txt)
set -euo pipefail
here=$(dirname "$0")
COLLECTIVES="all_reduce reduce_scatter all_gather broadcast" MAX=16M MPICH_RANKS=2 \
  bench/tools/collective_sweeps.sh "$here" "$1" "$2"
COLLECTIVES="all_reduce reduce_scatter all_gather broadcast" MAX=4K MPICH_RANKS=2 ITERATIONS=40 WARMUP=10 \
  bench/tools/collective_sweeps.sh "$here/small" "$1" "$2"
for d in "$here" "$here/small"; do bench/tools/collective_table.py "$d" > "$d/summary.txt"; done
