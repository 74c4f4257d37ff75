#!/usr/bin/env bash
# ddl's `auto` against MPI_Allreduce (Open MPI), 2 and 4 ranks, 16 KiB-64 MiB, with and without
# `--timed-writes` (each call's time including its rank's write of the input just before it, as a
# backward pass writes its gradients), RUNS runs each (~80 s at 3).
#   bench/results/mpi-raw/2026-12-05-timed-writes/run.sh BENCH [RUNS]
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
for r in $(seq "${2:-3}"); do
  for n in 2 4; do
    for m in tw plain; do
      flag=()
      [ "$m" = tw ] && flag=(--timed-writes)
      ompi_tuned "$n" "$1" --transport mpi -b 16K -e 64M -f 4 -n 10 -w 3 --strategy auto --baseline mpi "${flag[@]}" \
        > "$here/$m-n$n-run$r.txt" 2>&1
    done
  done
done
