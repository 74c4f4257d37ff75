#!/usr/bin/env bash
# The scoreboard's one mid-size cell below 1.0 (2 ranks, all-gather, 256 KiB, out of place: 0.77 in
# mpi-raw/2026-12-05-scoreboard/, median of 3 runs of 5 calls), again with 40 calls a size and RUNS runs,
# 128 KiB-1 MiB, Open MPI (tuned) and MPICH, auto beside MPI_Allgather.
#   bench/results/mpi-raw/2026-12-05-ag-256k/run.sh BUILD BUILD_MPICH [RUNS]
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
args=(--transport mpi --strategy auto --baseline mpi --collective all_gather -b 128K -e 1M -f 2 -n 40 -w 10)
for run in $(seq 1 "${3:-8}"); do
  ompi_tuned 2 "$1/bench/ddl-bench" "${args[@]}" > "$here/ompi_all_gather_n2_run$run.txt" 2>&1
  mpiexec.mpich -n 2 "$2/bench/ddl-bench" "${args[@]}" > "$here/mpich_all_gather_n2_run$run.txt" 2>&1
done
bench/tools/collective_table.py "$here" > "$here/summary.txt"
