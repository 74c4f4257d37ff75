#!/usr/bin/env bash
# Threads, two_shot pulling the reduced blocks (OLD: 363e593) against pushing them into every rank's
# result (NEW), in turns, ROUNDS rounds: every all-reduce strategy and `auto`, 2, 4 and 8 ranks,
# 4 KiB-64 MiB, 10 calls a size after 3 warm-ups (the sweep of bench/tools/shared_memory_runs.sh).
#   bench/results/shared-memory-raw/2026-12-05-pushed/run.sh OLD_BENCH NEW_BENCH [ROUNDS]   (~8 min at 3)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
all=ring,recursive_doubling,halving_doubling,one_shot,two_shot,two_shot_stream,auto
step() {
  for n in 2 4 8; do
    "$2" --ranks "$n" -b 4K -e 64M -f 4 -n 10 -w 3 --strategy "$all" > "$here/$1-n$n-run$3.txt" 2>&1
  done
}
in_turns "${3:-3}" "$1" "$2" step
