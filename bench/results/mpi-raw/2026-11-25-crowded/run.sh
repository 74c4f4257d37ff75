#!/bin/sh
# A/B: HEAD before this change (old: 2 us node steps whatever the crowding,
# broadcast priced on the transport's default link) against this change (new).
# Usage: sh run.sh OLD_BENCH NEW_BENCH OUTDIR
OLD=$1 NEW=$2 OUT=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for rep in 1 2 3; do for n in 4 8; do for v in old new; do
  B=$NEW; [ $v = old ] && B=$OLD
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $B --transport mpi --strategy auto \
    --baseline mpi -b 4K -e 4M -f 4 -n 50 -w 5 > $OUT/allreduce_${v}_n${n}_run$rep.txt 2>&1
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $B --transport mpi --strategy auto \
    --baseline mpi --collective broadcast -b 4K -e 16M -f 8 -n 10 -w 2 > $OUT/broadcast_${v}_n${n}_run$rep.txt 2>&1
done; done; done
