#!/bin/sh
# Small all-reduces timed in batches (--batch 20: 20 calls back to back per
# sample between the barriers) and one call a sample (--batch 1), ddl auto
# beside MPI_Allreduce, tuned Open MPI, 4 and 8 ranks, 2 runs each.
# Usage: sh run.sh BUILD OUTDIR
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for rep in 1 2; do for n in 4 8; do for k in 1 20; do
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $1/bench/ddl-bench --transport mpi \
    --strategy auto --baseline mpi -b 8 -e 4K -f 8 -n 200 -w 20 --batch $k > $2/ompi_n${n}_batch${k}_run$rep.txt 2>&1
done; done; done
