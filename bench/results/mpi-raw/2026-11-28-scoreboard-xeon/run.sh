#!/usr/bin/env bash
# Issue 21's scoreboard again, on another VM (Intel Xeon, 2 cores) with 55ef6a1's code, and the
# large sizes the goal names (64 and 256 MiB), from the repository root:
#   bench/results/mpi-raw/2026-11-28-scoreboard-xeon/run.sh BUILD BUILD_MPICH [OUTDIR]
# (OUTDIR: where the runs go, default this folder; later scoreboards name their own.)
# 1. 8 B-16 MiB, 5 timed iterations a size -> this folder
# 2. 8 B-4 KiB again with 40 timed iterations a size -> small/
# 3. 64 and 256 MiB, 3 timed iterations after 1 warm-up (all-reduce, reduce-scatter, all-gather) -> large/
# Tables: bench/tools/collective_table.py DIR (-> summary.txt in each)
set -euo pipefail
here=${3:-$(dirname "$0")}
all="all_reduce reduce_scatter all_gather broadcast"
COLLECTIVES="$all" MAX=16M MPICH_RANKS=2 bench/tools/collective_sweeps.sh "$here" "$1" "$2"
COLLECTIVES="$all" MAX=4K MPICH_RANKS=2 ITERATIONS=40 WARMUP=10 bench/tools/collective_sweeps.sh "$here/small" "$1" "$2"
COLLECTIVES="all_reduce reduce_scatter all_gather" MIN=64M MAX=256M FACTOR=4 MPICH_RANKS=2 ITERATIONS=3 WARMUP=1 \
  bench/tools/collective_sweeps.sh "$here/large" "$1" "$2"
for d in "$here" "$here/small" "$here/large"; do bench/tools/collective_table.py "$d" > "$d/summary.txt"; done
