#!/bin/sh
# The flagged round priced as one latency (was ceil(log2 n)): auto's plans
# over MPI before (OLD = commit 2bab49f) and after, one run each, 4 and 8 ranks.
# Usage: sh run.sh OLD_BENCH NEW_BENCH OUTDIR
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for n in 4 8; do for w in old new; do
  B=$2; [ $w = old ] && B=$1
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $B --transport mpi \
    --strategy auto,one_shot,two_shot,recursive_doubling --baseline mpi -b 8 -e 256K -f 8 -n 300 -w 30 > $3/$w-n$n.txt 2>&1
done; done
