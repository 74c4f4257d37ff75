#!/usr/bin/env bash
# The direct strategies reading their peers' plain buffers with cross-memory
# attach (new default) against the same binary through the stages in segments
# (DDL_MPI_CMA=0, the old path), in turns, 3 rounds: every collective against
# its MPI call, 256 KiB-128 MiB, Open MPI 2/4/8 ranks and MPICH 2 ranks.
#   run.sh BUILD BUILD_MPICH   (build folders holding bench/ddl-bench; writes here)
set -euo pipefail
build=$(realpath "$1") mpich=$(realpath "$2")
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
a=(--transport mpi --strategy auto --baseline mpi -b 256K -e 128M -f 8 -n 5 -w 2)
for r in 1 2 3; do for cma in 0 1; do
  for c in all_reduce reduce_scatter all_gather; do
    for n in 2 4 8; do
      mpirun -n $n "${m[@]}" -x DDL_MPI_CMA=$cma "$build/bench/ddl-bench" --collective $c "${a[@]}" > ompi-$c-cma$cma-n$n-r$r.txt 2>&1
    done
    mpiexec.mpich -n 2 -genv DDL_MPI_CMA $cma "$mpich/bench/ddl-bench" --collective $c "${a[@]}" > mpich-$c-cma$cma-n2-r$r.txt 2>&1
  done
done; done
