#!/usr/bin/env bash
# all_reduce through the "ddl" backend with MPI initialised at
# MPI_THREAD_SERIALIZED (old) and MPI_THREAD_MULTIPLE (new), in turns,
# 3 rounds, 4 ranks, gloo beside each.
#   run.sh OLD NEW   (folders holding the two builds' ddl_torch; writes here)
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in 1 2 3; do for v in old new; do
  dir=$old; [ $v = new ] && dir=$new
  PYTHONPATH=$dir mpirun -n 4 --oversubscribe --mca mpi_yield_when_idle 1 /usr/bin/python3 \
    "$repo/bench/torch/collectives.py" -b 4K -e 16M -f 16 -n 20 -w 3 > $v-r$r.txt 2>&1
done; done
