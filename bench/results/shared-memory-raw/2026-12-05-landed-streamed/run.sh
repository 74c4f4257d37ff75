#!/usr/bin/env bash
# Threads, one_shot in place above its stage (`one_shot::all_reduce_landed`): the reduced segments
# landed in the buffer with cached stores (OLD: d7ca096) against streaming stores (NEW), in turns:
# ROUNDS rounds at 2 and 4 ranks, 512 KiB-4 MiB, recursive doubling beside it (unchanged: the
# control); then ROUNDS/2 rounds at 8 ranks, 512 KiB-2 MiB.
#   bench/results/shared-memory-raw/2026-12-05-landed-streamed/run.sh OLD_BENCH NEW_BENCH [ROUNDS]   (~4 min at 10)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
rounds=${3:-10}
small() {
  for n in 2 4; do
    "$2" --ranks "$n" -b 512K -e 4M -f 2 -n 20 -w 5 --strategy one_shot,recursive_doubling > "$here/$1-n$n-run$3.txt" 2>&1
  done
}
eight() {
  "$2" --ranks 8 -b 512K -e 2M -f 2 -n 10 -w 3 --strategy one_shot > "$here/$1-n8-run$3.txt" 2>&1
}
in_turns "$rounds" "$1" "$2" small
in_turns $(( (rounds + 1) / 2 )) "$1" "$2" eight
