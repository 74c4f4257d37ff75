#!/usr/bin/env bash
# bfloat16 reductions 16 at a time, rounded by the CPU (AVX-512 BF16): the old
# and new ddl-bench in turns, bfloat16 (changed) and float (not changed: the
# control), 2 and 4 threads, 64 KiB - 64 MiB, auto.
# usage: run.sh OLD_BENCH NEW_BENCH OUT_DIR RUNS
set -euo pipefail
old=$1 new=$2 out=$3 runs=${4:-3}
mkdir -p "$out"
for run in $(seq 1 "$runs"); do
  for n in 2 4; do
    for d in bfloat16 float; do
      for which in old new; do
        bin=$old; [ $which = new ] && bin=$new
        "$bin" --ranks $n -b 64K -e 64M -f 4 -n 10 -w 2 --strategy auto -d $d > "$out/$which-n$n-$d-run$run.txt"
      done
    done
  done
done
