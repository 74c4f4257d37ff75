#!/usr/bin/env bash
# two_shot through the stages, cached against streamed (and reading the peers, and auto, which
# measures the three), beside MPI_Allreduce, Open MPI tuned as in the scoreboard; ROUNDS runs at
# 2 ranks (16, 64, 256 MiB) and at 4 ranks (64 MiB), each a fresh pair of processes, so each run
# finds the host's placement of the VM's two vCPUs anew; then the all-gathers (ag_*: 256 KiB-64 MiB,
# 2 ranks, beside MPI_Allgather, 3/4 of ROUNDS runs) and the reduce-scatters (rs_*: 256 KiB, 4 and
# 64 MiB, beside MPI_Reduce_scatter_block, half of ROUNDS runs). From the repository root:
# and, with BUILD_MPICH, the all-reduces over MPICH (mpich_*: 2 ranks, half of ROUNDS runs).
#   bench/results/mpi-raw/2026-12-04-streamed-stages/run.sh BUILD [ROUNDS] [BUILD_MPICH]     (~6 min at 8)
set -euo pipefail
here=$(dirname "$0")
build=${1:-build/release}
rounds=${2:-8}
build_mpich=${3:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
args=(--transport mpi --strategy two_shot,two_shot_stream,two_shot_read,auto --baseline mpi -n 3 -w 1)
for r in $(seq "$rounds"); do
  mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
    "$build/bench/ddl-bench" "${args[@]}" -b 16M -e 256M -f 4 > "$here/n2_run$r.txt" 2>&1
  if [ "$r" -le $((rounds / 2)) ]; then
    mpirun -n 4 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$build/bench/ddl-bench" "${args[@]}" -b 64M -e 64M > "$here/n4_run$r.txt" 2>&1
  fi
done
for r in $(seq $((rounds * 3 / 4))); do
  mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
    "$build/bench/ddl-bench" "${args[@]}" -n 5 -w 2 --collective all_gather -b 256K -e 64M -f 4 > "$here/ag_n2_run$r.txt" 2>&1
done
for r in $(seq $((rounds / 2))); do
  mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
    "$build/bench/ddl-bench" "${args[@]}" -n 5 -w 2 --collective reduce_scatter -b 256K -e 64M -f 16 > "$here/rs_n2_run$r.txt" 2>&1
done
if [ -n "$build_mpich" ]; then
  for r in $(seq $((rounds / 2))); do
    mpiexec.mpich -n 2 "$build_mpich/bench/ddl-bench" "${args[@]}" -b 16M -e 256M -f 4 > "$here/mpich_n2_run$r.txt" 2>&1
  done
fi
