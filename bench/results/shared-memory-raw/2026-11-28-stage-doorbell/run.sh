#!/bin/sh
# Threads' waits on a peer's stage (`wait_until`: one_shot's and two_shot's small calls, the
# landed in-place one_shot), before (OLD, 938c9fd: 448 yields, then 20 us sleeps) and after (NEW:
# where ranks outnumber the cores 32 yields, then sleep until a rank raises a counter,
# `stage_raised`), alone and beside one busy process; old and new in turns (new first in even rounds), REPS rounds. With
# STRATEGIES ring,recursive_doubling (waits unchanged) the same runs show the noise.
# usage: run.sh OLD_BENCH NEW_BENCH OUT [REPS] [STRATEGIES (default one_shot,auto)]
old=$1 new=$2 out=$3 reps=${4:-3}
mkdir -p "$out"
args="--strategy ${5:-one_shot,auto} -b 8 -e 4M -f 8 -n 30 -w 5"
for i in $(seq 1 "$reps"); do
  for load in alone busy; do
    pid=
    if [ "$load" = busy ]; then sh -c 'while :; do :; done' & pid=$!; fi
    for r in 2 4 8; do
      order="old new"; [ $((i % 2)) -eq 0 ] && order="new old"
      for v in $order; do
        eval bin=\$$v
        "$bin" --ranks "$r" $args > "$out/$v-$load-n$r-run$i.txt" 2>&1
      done
    done
    [ -n "$pid" ] && kill "$pid"
  done
done
