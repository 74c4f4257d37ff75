#!/usr/bin/env bash
# The measured all-gathers and reduce-scatters before (OLD: a trial's figure the least of its 3 calls)
# and after (NEW: their median), in turns, ROUNDS rounds, fresh processes each: Open MPI tuned,
# 2 and 4 ranks, auto beside MPI_Allgather / MPI_Reduce_scatter_block, 64 KiB-64 MiB. From the
# repository root:
#   bench/results/mpi-raw/2026-12-05-median-copies/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~3 min at 2)
set -euo pipefail
here=$(dirname "$0")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for r in $(seq "${3:-2}"); do
  for which in old new; do
    if [ "$which" = old ]; then b=$1; else b=$2; fi
    for n in 2 4; do
      for coll in all_gather reduce_scatter; do
        mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
          "$b/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi --collective $coll \
          -b 64K -e 64M -f 4 -n 5 -w 2 > "$here/${which}_${coll}_n${n}_run$r.txt" 2>&1
      done
    done
  done
done
