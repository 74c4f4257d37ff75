#!/usr/bin/env bash
# 2 MPI ranks, 16-64 KiB, auto and two_shot cached and streamed beside MPI_Allreduce and
# MPI_Allgather: OLD (85133e2: the streamed form's slots, calls up to 64 KiB, written cached) and NEW
# (written streamed; every algorithm measured for 2-rank sums from 64 KiB) in turns, ROUNDS rounds,
# fresh processes each (the host places the two vCPUs anew). Open MPI tuned as in the scoreboard.
# From the repository root:
#   bench/results/mpi-raw/2026-12-05-small-pairs/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~2 min at 6)
set -euo pipefail
here=$(dirname "$0")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for r in $(seq "${3:-6}"); do
  for which in old new; do
    if [ "$which" = old ]; then b=$1; else b=$2; fi
    for coll in all_reduce all_gather; do
      mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
        "$b/bench/ddl-bench" --transport mpi --strategy two_shot,two_shot_stream,auto --baseline mpi --collective $coll \
        -b 16K -e 64K -f 2 -n 20 -w 5 > "$here/${which}_${coll}_run$r.txt" 2>&1
    done
  done
done
