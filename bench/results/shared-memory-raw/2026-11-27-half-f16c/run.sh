#!/usr/bin/env bash
# 16-bit floats on the host 8 at a time against the element-wise conversions: the old
# and new ddl-bench alternating, half (changed), bfloat16 and float (not
# changed: the controls), 2 and 4 threads, 64 KiB - 64 MiB, auto.
# usage: [DTYPES="bfloat16 float"] run.sh OLD_BENCH NEW_BENCH OUT_DIR RUNS
set -euo pipefail
old=$1 new=$2 out=$3 runs=${4:-2}
dtypes=${DTYPES:-half bfloat16 float}
mkdir -p "$out"
for run in $(seq 1 "$runs"); do
  for n in 2 4; do
    for d in $dtypes; do
      for which in old new; do
        bin=$old; [ $which = new ] && bin=$new
        "$bin" --ranks $n -b 64K -e 64M -f 4 -n 10 -w 2 --strategy auto -d $d > "$out/$which-n$n-$d-run$run.txt"
      done
    done
  done
done
