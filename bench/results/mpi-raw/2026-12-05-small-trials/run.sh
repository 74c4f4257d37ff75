#!/usr/bin/env bash
# 2 ranks, 16-64 KiB: OLD (0fd0f2f: copies and 2-rank sums measured from 64 KiB, 3 trials a candidate)
# and NEW (from 16 KiB at 2 ranks, 9 trials a candidate below 64 KiB) in turns, ROUNDS rounds, fresh
# processes each (the host places the two vCPUs anew). MPI: auto and two_shot cached and streamed
# beside MPI_Allreduce and MPI_Allgather, Open MPI tuned as in the scoreboard. Threads: every
# all-reduce strategy. From the repository root:
#   bench/results/mpi-raw/2026-12-05-small-trials/run.sh OLD_BENCH NEW_BENCH [ROUNDS]   (~2 min at 6)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  for coll in all_reduce all_gather; do
    ompi_tuned 2 "$2" --transport mpi --strategy two_shot,two_shot_stream,auto --baseline mpi --collective $coll \
      -b 16K -e 64K -f 2 -n 20 -w 5 > "$here/$1_${coll}_run$3.txt" 2>&1
  done
  "$2" --ranks 2 --strategy ring,recursive_doubling,one_shot,two_shot,two_shot_stream,auto \
    -b 16K -e 64K -f 2 -n 20 -w 5 > "$here/$1_threads_run$3.txt" 2>&1
}
in_turns "${3:-6}" "$1" "$2" step
