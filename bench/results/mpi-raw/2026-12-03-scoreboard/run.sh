#!/usr/bin/env bash
# Issue 21's scoreboard at 8 B-4 KiB, every collective beside its MPI call, Open MPI 2/4/8 ranks and
# MPICH 2, 3 runs (collective_sweeps.sh), in both of ddl-bench's placements of the calls:
#   small/        one call a sample between barriers, 40 samples a size (as 2026-11-28's small/)
#   small-batch/  50 calls back to back a sample (--batch 50), 20 samples a size
# From the repository root, with the builds to measure:
#   bench/results/mpi-raw/2026-12-03-scoreboard/run.sh BUILD BUILD_MPICH [SUFFIX]
# (SUFFIX names the folders: small$SUFFIX/, small-batch$SUFFIX/). Tables: collective_table.py -> summary.txt
set -euo pipefail
here=$(dirname "$0")
all="all_reduce reduce_scatter all_gather broadcast"
sfx=${3:-}
COLLECTIVES="$all" MAX=4K MPICH_RANKS=2 ITERATIONS=40 WARMUP=10 bench/tools/collective_sweeps.sh "$here/small$sfx" "$1" "$2"
COLLECTIVES="$all" MAX=4K MPICH_RANKS=2 ITERATIONS=20 WARMUP=5 BATCH=50 \
  bench/tools/collective_sweeps.sh "$here/small-batch$sfx" "$1" "$2"
for d in "$here/small$sfx" "$here/small-batch$sfx"; do bench/tools/collective_table.py "$d" > "$d/summary.txt"; done
