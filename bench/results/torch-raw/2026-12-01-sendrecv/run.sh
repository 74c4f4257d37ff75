#!/usr/bin/env bash
# torch.distributed point-to-point through the "ddl" backend beside gloo:
# bench/torch/collectives.py --collective sendrecv (irecv from the previous
# rank, isend to the next, both waited for), 2 and 4 ranks, 4 KiB to 64 MiB,
# 3 rounds.   run.sh BUILD   (a build folder holding integrations/torch)
set -euo pipefail
build=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=$build/integrations/torch
{ lscpu | grep 'Model name'; nproc; git -C "$here" rev-parse --short HEAD; } > machine.txt
for r in 1 2 3; do
  for n in 2 4; do
    mpiexec -n $n --oversubscribe /usr/bin/python3 "$here/../../../torch/collectives.py" --collective sendrecv \
      -b 4K -e 64M -f 4 -n 10 -w 2 > sendrecv-n$n-r$r.txt 2>&1
  done
done
tail -n +2 sendrecv-n*-r*.txt
