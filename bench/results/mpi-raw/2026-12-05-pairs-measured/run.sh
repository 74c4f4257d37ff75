#!/usr/bin/env bash
# auto's 2-rank all-reduces before (OLD: the model's plan, two_shot's forms measured) and after
# (NEW: every algorithm measured for sums, `detail::order_free`), in turns, ROUNDS rounds, each
# run a fresh set of processes (the host places the VM's two vCPUs anew): 2 MPI ranks (Open MPI
# tuned as in the scoreboard, beside MPI_Allreduce) and 2 threads, 64 KiB-64 MiB, float sum.
# From the repository root:
#   bench/results/mpi-raw/2026-12-05-pairs-measured/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~4 min at 3)
set -euo pipefail
here=$(dirname "$0")
rounds=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for r in $(seq "$rounds"); do
  for which in old new; do
    if [ "$which" = old ]; then b=$1; else b=$2; fi
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$b/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi -b 64K -e 64M -f 4 -n 5 -w 2 \
      > "$here/${which}_mpi_n2_run$r.txt" 2>&1
    "$b/bench/ddl-bench" --transport local --ranks 2 --strategy ring,two_shot,two_shot_stream,auto \
      -b 64K -e 64M -f 4 -n 5 -w 2 > "$here/${which}_threads_n2_run$r.txt" 2>&1
  done
done
