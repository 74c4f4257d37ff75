#!/usr/bin/env bash
# Issue 21's scoreboard on 363e593 (2 ranks measure from 16 KiB, 9 trials below 64 KiB): every
# collective beside its MPI call, 8 B-16 MiB with 5 calls a size, 8 B-4 KiB again with 40 (small/);
# Open MPI 2/4/8 ranks, MPICH 2; 3 runs each. The 64 and 256 MiB tier (large/ of the 2026-11-28 script)
# is not rerun: nothing from 64 KiB up changed since mpi-raw/2026-12-04-scoreboard-streamed/large.
#   bench/results/mpi-raw/2026-12-05-scoreboard/run.sh BUILD BUILD_MPICH
set -euo pipefail
here=$(dirname "$0")
all="all_reduce reduce_scatter all_gather broadcast"
COLLECTIVES="$all" MAX=16M MPICH_RANKS=2 bench/tools/collective_sweeps.sh "$here" "$1" "$2"
COLLECTIVES="$all" MAX=4K MPICH_RANKS=2 ITERATIONS=40 WARMUP=10 bench/tools/collective_sweeps.sh "$here/small" "$1" "$2"
for d in "$here" "$here/small"; do bench/tools/collective_table.py "$d" > "$d/summary.txt"; done
