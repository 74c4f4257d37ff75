#!/usr/bin/env bash
# gather, scatter and reduce (root 0; through the stages for small calls --
# reduce to 4 MiB -- else one message a rank, the reduce after a
# reduce-scatter) beside MPI_Gather, MPI_Scatter and MPI_Reduce: Open MPI at
# 2, 4 and 8 ranks and MPICH at 2, 8 B to 16 MiB, in place and out of place,
# 3 rounds; then mpi_ratios.py -> summary.txt.
#   run.sh BUILD [BUILD_MPICH]   (build folders holding bench/ddl-bench; writes here)
set -euo pipefail
build=$(realpath "$1")
mpich=${2:+$(realpath "$2")}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
args=(--transport mpi --baseline mpi -b 8 -e 16M -f 4 -n 10 -w 2)
{ lscpu | grep 'Model name'; nproc; git -C "$here" rev-parse --short HEAD; } > machine.txt
for r in 1 2 3; do
  for c in gather scatter reduce; do
    for n in 2 4 8; do
      mpirun -n $n "${m[@]}" "$build/bench/ddl-bench" "${args[@]}" --collective $c > ompi-$c-n$n-r$r.txt 2>&1
    done
    if [ -n "$mpich" ]; then
      mpiexec.mpich -n 2 "$mpich/bench/ddl-bench" "${args[@]}" --collective $c > mpich-$c-n2-r$r.txt 2>&1
    fi
  done
done
tools=$here/../../../tools
{
  for c in gather scatter reduce; do
    for n in 2 4 8; do
      echo "## $c, Open MPI, $n ranks"
      python3 "$tools/mpi_ratios.py" --impl ddl:$c ompi-$c-n$n-r*.txt
      echo
    done
    if [ -n "$mpich" ]; then
      echo "## $c, MPICH, 2 ranks"
      python3 "$tools/mpi_ratios.py" --impl ddl:$c mpich-$c-n2-r*.txt
      echo
    fi
  done
} > summary.txt
cat summary.txt
