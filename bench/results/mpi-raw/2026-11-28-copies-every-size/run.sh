#!/usr/bin/env bash
# All-gathers and broadcasts of 256 MiB measured (new default: every size from 64 KiB) against the
# old default (measured up to 64 MiB, the model's plan above): OLD and NEW binaries in turns, 3 rounds.
#   run.sh OLD_OMPI NEW_OMPI OLD_MPICH NEW_MPICH   (ddl-bench binaries; writes here)
set -euo pipefail
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
a=(--transport mpi --strategy auto --baseline mpi -b 256M -e 256M -n 3 -w 1)
for r in 1 2 3; do for b in old new; do
  o=$1 p=$3; [ $b = new ] && o=$2 p=$4
  for n in 2 4; do
    mpirun -n $n "${m[@]}" "$o" --collective all_gather "${a[@]}" > ag-$b-n$n-r$r.txt 2>&1
    mpirun -n $n "${m[@]}" "$o" --collective broadcast "${a[@]}" > bc-$b-n$n-r$r.txt 2>&1
  done
  mpiexec.mpich -n 2 "$p" --collective all_gather "${a[@]}" > mpich-ag-$b-n2-r$r.txt 2>&1
done; done
