#!/usr/bin/env bash
# The multi-ring with its first level through shared memory (direct_first)
# against the plain multi-ring, the flat ring, auto and MPI_Allreduce, on MPI
# ranks of one machine split into emulated machines: DDL_MPI_SHM_RANKS=K lets
# only blocks of K consecutive ranks share stages, so the outer level goes
# through MPI's messages as it would between machines (here still Open MPI's
# shared-memory transport, vader: the outer level is not slowed down).
#   8 ranks = 2 machines of 4 (--dims 4x2), 4 ranks = 2 machines of 2 (--dims 2x2).
# usage: run.sh BUILD_DIR OUT_DIR [RUNS]
set -euo pipefail
build=${1:?build dir}; out=${2:?out dir}; runs=${3:-3}
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
mkdir -p "$out"
for run in $(seq "$runs"); do
  for cfg in "8 4 4x2" "4 2 2x2"; do
    set -- $cfg
    mpirun -n "$1" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned -x DDL_MPI_SHM_RANKS="$2" \
      "$build/bench/ddl-bench" --transport mpi --dims "$3" --strategy multi_ring,direct_first,ring,auto \
      --baseline mpi -b 64K -e 64M -f 4 -n 20 -w 3 > "$out/n$1-run$run.txt"
  done
done
