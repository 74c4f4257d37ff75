#!/usr/bin/env bash
# The streamed form (two_shot_stream) before and after its gathered copies into the result were
# streamed too, OLD and NEW binaries in turns, ROUNDS rounds; each run a fresh set of processes
# (the host places the VM's two vCPUs anew): all-reduce 2 ranks 16-256 MiB, 4 ranks 64 MiB;
# all-gather 2 ranks 1-64 MiB. Open MPI tuned as in the scoreboard. From the repository root:
#   bench/results/mpi-raw/2026-12-04-gathers-streamed/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~6 min at 4)
set -euo pipefail
here=$(dirname "$0")
rounds=${3:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
args=(--transport mpi --strategy two_shot,two_shot_stream,auto --baseline mpi -n 3 -w 1)
for r in $(seq "$rounds"); do
  for which in old new; do
    if [ "$which" = old ]; then b=$1; else b=$2; fi
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$b/bench/ddl-bench" "${args[@]}" -b 16M -e 256M -f 4 > "$here/${which}_n2_run$r.txt" 2>&1
    mpirun -n 4 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$b/bench/ddl-bench" "${args[@]}" -b 64M -e 64M > "$here/${which}_n4_run$r.txt" 2>&1
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$b/bench/ddl-bench" "${args[@]}" -n 5 -w 2 --collective all_gather -b 1M -e 64M -f 8 > "$here/${which}_ag_n2_run$r.txt" 2>&1
  done
done
