#!/usr/bin/env bash
# auto's 2-rank all-reduces before (OLD: the model's plan, two_shot's forms measured) and after
# (NEW: every algorithm measured for sums, `detail::order_free`), in turns, ROUNDS rounds, each
# run a fresh set of processes (the host places the VM's two vCPUs anew): 2 MPI ranks (Open MPI
# tuned as in the scoreboard, beside MPI_Allreduce) and 2 threads, 64 KiB-64 MiB, float sum.
# From the repository root:
#   bench/results/mpi-raw/2026-12-05-pairs-measured/run.sh OLD_BUILD NEW_BUILD [ROUNDS]   (~4 min at 3)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  ompi_tuned 2 "$2/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi -b 64K -e 64M -f 4 -n 5 -w 2 \
    > "$here/$1_mpi_n2_run$3.txt" 2>&1
  "$2/bench/ddl-bench" --transport local --ranks 2 --strategy ring,two_shot,two_shot_stream,auto \
    -b 64K -e 64M -f 4 -n 5 -w 2 > "$here/$1_threads_n2_run$3.txt" 2>&1
}
in_turns "${3:-3}" "$1" "$2" step
