#!/bin/sh
# MPI ranks' waits on a peer's stage (`mpi_transport::wait_until`: one_shot's and two_shot's small
# calls through counters, the landed in-place one_shot), before (OLD, 297a0d7: 64 or, where ranks
# outnumber the cores, 0 polls, 448 yields, then 20 us sleeps) and after (NEW: 32 or 0 polls, 448 or
# 32 yields, then asleep on the peer's futex doorbell until it raises a counter, `stage_raised`),
# alone and beside one busy process; old and new in turns (new first in even rounds), REPS rounds.
# The ring's rows (message waits, unchanged) in the same runs show the noise.
# usage: run.sh OLD_BENCH NEW_BENCH OUT [REPS]
old=$1 new=$2 out=$3 reps=${4:-3}
mkdir -p "$out"
args="--transport mpi --strategy one_shot,auto,ring -b 8 -e 2M -f 8 -n 10 -w 2 --batch 10"
for i in $(seq 1 "$reps"); do
  for load in alone busy; do
    pid=
    if [ "$load" = busy ]; then sh -c 'while :; do :; done' & pid=$!; fi
    for r in 2 4 8; do
      order="old new"; [ $((i % 2)) -eq 0 ] && order="new old"
      for v in $order; do
        eval bin=\$$v
        timeout 600 mpirun --allow-run-as-root -n "$r" --oversubscribe --mca mpi_yield_when_idle 1 \
          "$bin" $args > "$out/$v-$load-n$r-run$i.txt" 2>&1
      done
    done
    [ -n "$pid" ] && kill "$pid"
  done
done
