#!/usr/bin/env bash
# In place against out of place, every all-reduce strategy on 2 and 4 threads, 16 KiB-4 MiB, with
# and without `--timed-writes` (each call's time including its rank's write of the input just
# before it), the two modes alternating process by process, RUNS runs each (~40 s a run).
#   bench/results/shared-memory-raw/2026-12-05-timed-writes/run.sh BENCH [RUNS]
#   python3 bench/tools/median_of_runs.py D/tw-nN-run*.txt --ip-over-oop   (and D/plain-nN-...)
set -euo pipefail
here=$(dirname "$0")
bench=$1
all=ring,recursive_doubling,halving_doubling,one_shot,two_shot,two_shot_stream,auto
for r in $(seq "${2:-10}"); do
  for n in 2 4; do
    "$bench" --ranks "$n" -b 16K -e 4M -f 4 -n 20 -w 5 --timed-writes --strategy "$all" > "$here/tw-n$n-run$r.txt" 2>&1
    "$bench" --ranks "$n" -b 16K -e 4M -f 4 -n 20 -w 5 --strategy "$all" > "$here/plain-n$n-run$r.txt" 2>&1
  done
done
