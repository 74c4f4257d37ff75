#!/usr/bin/env bash
# `auto` whose model plan is one_shot or two_shot: run as the model says (OLD: 36460fe; only
# two_shot's forms measured) against measured among one_shot, two_shot and its forms (NEW), in
# turns, ROUNDS rounds. 15 warm-up calls a size, so the trials (at most 1 + 3 x 3 calls) end
# before the timed ones.
#   sweep: threads, 4 and 8 ranks, 16 KiB-4 MiB, one_shot / two_shot / two_shot_stream beside it
#          (files {old,new}-nN-runR.txt; ~13 s a round)
#   focus: threads, 4 ranks, 64 and 128 KiB, 40 calls (focus-{old,new}-n4-runR.txt; ~3 s a round)
#   mpi:   4 Open MPI ranks, 16 KiB-2 MiB (mpi-{old,new}-n4-runR.txt; ~3 s a round)
#   bench/results/shared-memory-raw/2026-12-05-direct-measured/run.sh OLD_BENCH NEW_BENCH ROUNDS sweep|focus|mpi
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
sweep() {
  for n in 4 8; do
    "$2" --ranks "$n" -b 16K -e 4M -f 2 -n 20 -w 15 --strategy one_shot,two_shot,two_shot_stream,auto \
      > "$here/$1-n$n-run$3.txt" 2>&1
  done
}
focus() {
  "$2" --ranks 4 -b 64K -e 128K -f 2 -n 40 -w 15 --strategy one_shot,two_shot,auto > "$here/focus-$1-n4-run$3.txt" 2>&1
}
mpi() {
  ompi_tuned 4 "$2" --transport mpi -b 16K -e 2M -f 2 -n 20 -w 15 --strategy one_shot,two_shot,auto \
    > "$here/mpi-$1-n4-run$3.txt" 2>&1
}
in_turns "$3" "$1" "$2" "$4"
