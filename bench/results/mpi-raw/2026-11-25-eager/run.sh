#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")"  # beside a copy of build/dev/bench/ddl-bench
for rep in 1 2 3; do for n in 2 4 8; do for mode in on off; do
  extra=""; [ $mode = off ] && extra="-x DDL_MPI_EAGER_BYTES=0"
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 $extra -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 \
    ./ddl-bench --transport mpi --strategy auto --baseline mpi -b 1K -e 64K -f 2 -n 1000 -w 50 > ${mode}_n${n}_run${rep}.txt 2>&1
done; done; done
