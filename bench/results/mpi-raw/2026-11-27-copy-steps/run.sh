#!/bin/sh
# The ring's reduce-scatter (every step a receive-and-reduce) against its all-gather (every step a
# copy) over MPI on one node, same sizes: their time ratio is the copy-step factor a model would need.
# usage: run.sh BUILD OUT RUNS
build=$1 out=$2 runs=${3:-2}
mkdir -p "$out"
for run in $(seq 1 "$runs"); do for n in 2 4; do for coll in reduce_scatter all_gather; do
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 \
    -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 \
    "$build/bench/ddl-bench" --transport mpi --collective $coll --strategy ring -b 1M -e 64M -f 4 -n 10 -w 2 \
    > "$out/${coll}_n${n}_run$run.txt" 2>&1
done; done; done
