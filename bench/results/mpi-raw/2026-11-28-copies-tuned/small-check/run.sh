#!/usr/bin/env bash
# Small all-gathers (4 ranks) and broadcasts (8 ranks): OLD (11a13c4) and NEW in turns, 4 rounds
# (ag-*/bc-*), then NEW with DDL_TUNE_COPIES=0 and with the default in turns, 3 rounds (t0-*/t64M-*).
set -euo pipefail
old=$1 new=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1)
a=(--transport mpi --strategy auto --baseline mpi -b 8 -e 4K -f 8 -n 40 -w 5)
for r in 1 2 3 4; do for b in new old; do bin=$old; [ $b = new ] && bin=$new
  mpirun -n 4 "${m[@]}" "$bin" --collective all_gather "${a[@]}" > ag-$b-$r.txt 2>&1
  mpirun -n 8 "${m[@]}" "$bin" --collective broadcast "${a[@]}" > bc-$b-$r.txt 2>&1
done; done
for r in 1 2 3; do for v in 0 64M; do
  mpirun -n 4 "${m[@]}" -x DDL_TUNE_COPIES=$v "$new" --collective all_gather "${a[@]}" --explain > t$v-$r.txt 2>&1
done; done
# Then (x-*): the untuned path back to the call's own tag (no plan stamp), DDL_TUNE_COPIES=0, new and
# old in turns, 3 rounds:
#   mpirun -n 4 ... -x DDL_TUNE_COPIES=0 BIN --collective all_gather (as above) > x-{new,old}-R.txt
