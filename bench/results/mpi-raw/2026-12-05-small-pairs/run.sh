#!/usr/bin/env bash
# 2 MPI ranks, 16-64 KiB, auto and two_shot cached and streamed beside MPI_Allreduce and
# MPI_Allgather: OLD (85133e2: the streamed form's slots, calls up to 64 KiB, written cached) and NEW
# (written streamed; every algorithm measured for 2-rank sums from 64 KiB) in turns, ROUNDS rounds,
# fresh processes each (the host places the two vCPUs anew). Open MPI tuned as in the scoreboard.
# From the repository root:
#   bench/results/mpi-raw/2026-12-05-small-pairs/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~2 min at 6)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  for coll in all_reduce all_gather; do
    ompi_tuned 2 "$2/bench/ddl-bench" --transport mpi --strategy two_shot,two_shot_stream,auto --baseline mpi \
      --collective $coll -b 16K -e 64K -f 2 -n 20 -w 5 > "$here/$1_${coll}_run$3.txt" 2>&1
  done
}
in_turns "${3:-6}" "$1" "$2" step
