#!/usr/bin/env bash
# The 2-rank all-gather at 16-32 KiB again, 40 timed calls a size (the 20 of ../run.sh left its
# 16 KiB out-of-place cell at 0.86 of the best fixed form): OLD and NEW in turns, ROUNDS rounds.
#   bench/results/mpi-raw/2026-12-05-small-trials/all-gather-40/run.sh OLD_BENCH NEW_BENCH [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  ompi_tuned 2 "$2" --transport mpi --strategy two_shot,two_shot_stream,two_shot_read,auto --baseline mpi \
    --collective all_gather -b 16K -e 32K -f 2 -n 40 -w 5 --explain > "$here/$1_all_gather_run$3.txt" 2>&1
}
in_turns "${3:-8}" "$1" "$2" step
