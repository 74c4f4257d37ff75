#!/usr/bin/env bash
# two_shot over tuned Open MPI on plain buffers: through the stages
# (DDL_MPI_READ=0) against reading the peers' memory (cross-memory attach),
# alternating in one sitting; 2 and 4 ranks, `auto` beside MPI_Allreduce.
# Usage: run.sh BUILD OUT [RUNS]
set -euo pipefail
build=$1 out=$2 runs=${3:-3}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in $(seq 1 "$runs"); do
  for n in 2 4; do
    for read in 0 1; do
      mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 \
        -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 -x DDL_MPI_READ=$read \
        "$build/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi -b 2M -e 128M -f 4 -n 10 -w 2 \
        > "$out/read$read-n$n-run$r.txt"
    done
  done
done
