#!/usr/bin/env bash
# The 2-rank all-gather at 16-32 KiB again, 40 timed calls a size (the 20 of ../run.sh left its
# 16 KiB out-of-place cell at 0.86 of the best fixed form): OLD and NEW in turns, ROUNDS rounds.
#   bench/results/mpi-raw/2026-12-05-small-trials/all-gather-40/run.sh OLD_BENCH NEW_BENCH [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for r in $(seq "${3:-8}"); do
  for which in old new; do
    if [ "$which" = old ]; then b=$1; else b=$2; fi
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
      "$b" --transport mpi --strategy two_shot,two_shot_stream,two_shot_read,auto --baseline mpi --collective all_gather \
      -b 16K -e 32K -f 2 -n 40 -w 5 --explain > "$here/${which}_all_gather_run$r.txt" 2>&1
  done
done
