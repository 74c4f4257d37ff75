#!/usr/bin/env bash
# one_shot in place on threads above its stage: the result built whole in
# the workspace and copied back after a round (OLD, commit 3870963) against
# segments landed through 4 slots once every peer has read them (NEW),
# alternating, RUNS runs each, 2, 4 and 8 ranks; two_shot beside it as a
# control. Usage: run.sh OLD_BENCH NEW_BENCH OUT [RUNS]
set -euo pipefail
old=$1 new=$2 out=$3 runs=${4:-3}
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
  for n in 2 4 8; do
    for which in old new; do
      b=$old; [ "$which" = new ] && b=$new
      "$b" --ranks "$n" -b 256K -e 64M -f 4 -n 10 -w 2 --strategy one_shot,two_shot > "$out/$which-n$n-run$r.txt"
    done
  done
done
