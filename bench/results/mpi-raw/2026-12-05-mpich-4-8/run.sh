#!/usr/bin/env bash
# Issue 21's scoreboard under MPICH at 4 and 8 ranks (the recorded scoreboards run MPICH at 2 only):
# every collective beside its MPI call, 8 B-16 MiB with 5 calls a size, 8 B-4 KiB again with 40
# (small/); 3 runs each. On this 2-core VM MPICH's own waits busy-poll, so its calls and
# MPI_Barrier between the samples are slow at 4 and 8 ranks (2026-11-23).
#   bench/results/mpi-raw/2026-12-05-mpich-4-8/run.sh BUILD_MPICH
set -euo pipefail
here=$(dirname "$0")
all="all_reduce reduce_scatter all_gather broadcast"
COLLECTIVES="$all" MAX=16M OMPI_RANKS= MPICH_RANKS="4 8" bench/tools/collective_sweeps.sh "$here" /nonexistent "$1"
COLLECTIVES="$all" MAX=4K OMPI_RANKS= MPICH_RANKS="4 8" ITERATIONS=40 WARMUP=10 bench/tools/collective_sweeps.sh "$here/small" /nonexistent "$1"
for d in "$here" "$here/small"; do bench/tools/collective_table.py "$d" > "$d/summary.txt"; done
