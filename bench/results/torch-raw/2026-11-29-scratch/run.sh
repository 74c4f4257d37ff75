#!/usr/bin/env bash
# The "ddl" backend's list forms of all_gather / reduce_scatter before (a
# fresh flat buffer each call) and after (scratch buffers kept between calls),
# in turns, 3 rounds, 2 and 4 ranks.
#   run.sh OLD NEW   (folders holding a built ddl_torch package each; writes here)
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in 1 2 3; do for v in old new; do for n in 2 4; do
  dir=$old; [ $v = new ] && dir=$new
  PYTHONPATH=$dir mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 /usr/bin/python3 list_forms.py > $v-n$n-r$r.txt 2>&1
done; done; done
