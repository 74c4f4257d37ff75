#!/usr/bin/env bash
# Point-to-point: ddl-bench --collective sendrecv (every rank's buffer to the
# next rank: ddl's recv_async and send) beside MPI_Sendrecv (in place:
# MPI_Sendrecv_replace; ddl receiving into a buffer of the size, copied
# back): Open MPI at 2, 4 and 8 ranks and MPICH at 2, 8 B to 16 MiB, 3 rounds;
# then mpi_ratios.py -> summary.txt.
#   run.sh BUILD [BUILD_MPICH]   (build folders holding bench/ddl-bench; writes here)
set -euo pipefail
build=$(realpath "$1")
mpich=${2:+$(realpath "$2")}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
args=(--transport mpi --baseline mpi --collective sendrecv -b 8 -e 16M -f 4 -n 10 -w 2)
{ lscpu | grep 'Model name'; nproc; git -C "$here" rev-parse --short HEAD; } > machine.txt
for r in 1 2 3; do
  for n in 2 4 8; do
    mpirun -n $n "${m[@]}" "$build/bench/ddl-bench" "${args[@]}" > ompi-n$n-r$r.txt 2>&1
  done
  if [ -n "$mpich" ]; then
    mpiexec.mpich -n 2 "$mpich/bench/ddl-bench" "${args[@]}" > mpich-n2-r$r.txt 2>&1
  fi
done
tools=$here/../../../tools
{
  for n in 2 4 8; do
    echo "## sendrecv, Open MPI, $n ranks"
    python3 "$tools/mpi_ratios.py" --impl ddl:sendrecv ompi-n$n-r*.txt
    echo
  done
  if [ -n "$mpich" ]; then
    echo "## sendrecv, MPICH, 2 ranks"
    python3 "$tools/mpi_ratios.py" --impl ddl:sendrecv mpich-n2-r*.txt
    echo
  fi
} > summary.txt
cat summary.txt
