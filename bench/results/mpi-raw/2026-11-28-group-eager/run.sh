#!/usr/bin/env bash
# Group views forward eager_bytes: OLD = ddl-bench of 11a13c4, NEW = with the change, in turns.
#   run.sh OLD NEW OUT 3   then   summarize.py OUT > summary.txt
# The ring (a one-dimensional multi-ring, on a group view) is what changes; halving-doubling
# runs on the transport itself and is the control.
set -euo pipefail
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq 1 "$rounds"); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    for n in 2 4 8; do
      mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 "$bin" --transport mpi \
        --strategy ring,halving_doubling -b 4K -e 256K -f 2 -n 40 -w 5 > "$out/$b-n$n-r$round.txt" 2>&1
    done
  done
done
