#!/usr/bin/env bash
# Plain buffers against ddl::shared_buffer over tuned Open MPI, 2 and 4 ranks,
# on this session's VM (it reports an Intel Xeon, 2 cores; the earlier MPI
# results are from an AMD EPYC VM). Usage: run.sh BUILD OUT [RUNS]
set -euo pipefail
build=$1 out=$2 runs=${3:-2}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in $(seq 1 "$runs"); do
  for n in 2 4; do
    for buf in plain shared; do
      extra=(); [ "$buf" = shared ] && extra=(--shared-buffers)
      mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 \
        -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 \
        "$build/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi -b 1M -e 64M -f 8 -n 10 -w 2 \
        "${extra[@]}" > "$out/$buf-n$n-run$r.txt"
    done
  done
done
