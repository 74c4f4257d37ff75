#!/bin/sh
# One-shot through counters in the stages on threads: the binary before
# (BEFORE, the commit without it) and after (AFTER), in turns, 3 runs each,
# 2, 4 and 8 in-process ranks. Usage: run.sh BEFORE_BENCH AFTER_BENCH OUTDIR
before=$1 after=$2 out=$3
for run in 1 2 3; do
  for n in 2 4 8; do
    for which in before after; do
      bin=$before; [ $which = after ] && bin=$after
      "$bin" --ranks $n --strategy auto,one_shot,two_shot,recursive_doubling -b 8 -e 256K -f 2 -n 200 -w 20 \
        > "$out/$which-n$n-run$run.txt"
    done
  done
done
