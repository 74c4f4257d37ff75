#!/usr/bin/env bash
# The one-way broadcast trial (one-way-broadcast.patch on 11a13c4, not kept):
# OLD = ddl-bench of 11a13c4, NEW = the same with the patch, in turns.
#   run.sh OLD NEW OUT ROUNDS RANKS "SIZE FLAGS"   e.g.
#   run.sh old new small 3 "2 4 8" "-b 8 -e 256K -f 8 -n 100 -w 20"
#   run.sh old new small-more 5 "4 8" "-b 8 -e 4K -f 8 -n 200 -w 20"   (new first in each round)
#   run.sh old new large 3 "2 4 8" "-b 128K -e 8M -f 4 -n 20 -w 3"    (new first in each round)
# then summarize.py OUT
set -euo pipefail
old=$1 new=$2 out=$3 rounds=$4 ranks=$5 sizes=$6
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq 1 "$rounds"); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    for n in $ranks; do
      # shellcheck disable=SC2086
      mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 "$bin" --transport mpi --collective broadcast \
        --strategy auto --baseline mpi $sizes > "$out/$b-n$n-r$round.txt" 2>&1
    done
  done
done
