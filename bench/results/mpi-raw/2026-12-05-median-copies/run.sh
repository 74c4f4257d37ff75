#!/usr/bin/env bash
# The measured all-gathers and reduce-scatters before (OLD: a trial's figure the least of its 3 calls)
# and after (NEW: their median), in turns, ROUNDS rounds, fresh processes each: Open MPI tuned,
# 2 and 4 ranks, auto beside MPI_Allgather / MPI_Reduce_scatter_block, 64 KiB-64 MiB. From the
# repository root:
#   bench/results/mpi-raw/2026-12-05-median-copies/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~3 min at 2)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  for n in 2 4; do
    for coll in all_gather reduce_scatter; do
      ompi_tuned $n "$2/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi --collective $coll \
        -b 64K -e 64M -f 4 -n 5 -w 2 > "$here/$1_${coll}_n${n}_run$3.txt" 2>&1
    done
  done
}
in_turns "${3:-2}" "$1" "$2" step
