#!/usr/bin/env bash
# Recursive doubling in place on threads: the double buffer (OLD, commit
# a7f584c) against chunks landed and combined once sent (NEW), alternating,
# RUNS runs each, 2 and 4 ranks; halving_doubling and the ring beside it as
# controls. Usage: run.sh OLD_BUILD NEW_BUILD OUT [RUNS]
set -euo pipefail
old=$1 new=$2 out=$3 runs=${4:-3}
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
  for n in 2 4; do
    for which in old new; do
      b=$old; [ "$which" = new ] && b=$new
      "$b/bench/ddl-bench" --ranks "$n" -b 64K -e 64M -f 4 -n 10 -w 2 \
        --strategy recursive_doubling,halving_doubling,ring > "$out/$which-n$n-run$r.txt"
    done
  done
done
