#!/usr/bin/env bash
# The "ddl" backend's reduce, gather and scatter on ddl's own (they were an
# all_reduce, an all_gather and a broadcast of every part: ../2026-11-29-rooted)
# beside gloo's, all_reduce as the yardstick, 2 and 4 ranks, 3 rounds.
#   run.sh BUILD   (a build folder with integrations/torch built; writes here)
set -euo pipefail
build=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=$build/integrations/torch
for r in 1 2 3; do for n in 2 4; do
  for c in reduce gather scatter all_reduce; do
    mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 /usr/bin/python3 "$repo/bench/torch/collectives.py" \
      --collective $c -b 4K -e 64M -f 4 -n 10 -w 2 > "$here/$c-n$n-r$r.txt" 2>&1
  done
done; done
cd "$here" && python3 ../2026-11-29-rooted/summarize.py > summary.txt && cat summary.txt
