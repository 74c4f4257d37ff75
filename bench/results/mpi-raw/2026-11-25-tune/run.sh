#!/bin/bash
# Tuned Open MPI, auto with its measured choice (DDL_TUNE=16M) and
# without (DDL_TUNE=0), alternating; run from the repository root after
# building build/dev.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for rep in 1 2 3; do for n in 2 4; do for mode in tuned model; do
  v=16M; [ $mode = model ] && v=0
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$t -x DDL_TUNE=$v \
    build/dev/bench/ddl-bench --transport mpi --strategy auto --baseline mpi -b 4K -e 16M -f 4 -n 50 -w 5 \
    > bench/results/mpi-raw/2026-11-25-tune/${mode}_n${n}_run$rep.txt 2>&1
done; done; done
