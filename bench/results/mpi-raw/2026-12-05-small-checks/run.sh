#!/usr/bin/env bash
# Two checks of small 2-rank calls, Open MPI tuned, ROUNDS fresh runs each (default 6), from the
# repository root:
#   bench/results/mpi-raw/2026-12-05-small-checks/run.sh BENCH [ROUNDS]    (~20 s)
# 1. the 8-64 B all-reduce one call between barriers (--batch 1) and 100 back to back (--batch 100),
#    beside MPI_Allreduce -> batch{1,100}_run*.txt
# 2. the 16 KiB all-gather with auto's measuring on and off (DDL_TUNE_COPIES=0), 40 calls, beside the
#    fixed cached two_shot -> tune{on,off}_run*.txt
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
batches() {
  ompi_tuned 2 "$2" --transport mpi --strategy auto --baseline mpi -b 8 -e 64 -f 8 -n 40 -w 10 --batch "${1#batch}" \
    > "$here/$1_run$3.txt" 2>&1
}
tuning() {
  local e=X=1
  [ "$1" = tuneoff ] && e=DDL_TUNE_COPIES=0
  ompi_tuned 2 -x "$e" "$2" --transport mpi --strategy two_shot,auto --collective all_gather -b 16K -e 16K -n 40 -w 5 \
    > "$here/$1_run$3.txt" 2>&1
}
in_turns "${2:-6}" "$1" "$1" batches batch1 batch100
in_turns "${2:-6}" "$1" "$1" tuning tuneon tuneoff
