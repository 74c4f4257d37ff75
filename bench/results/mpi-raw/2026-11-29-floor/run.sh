#!/usr/bin/env bash
# What bounds a 2-rank in-place all-reduce on this machine (issue 21's >= 1.3x
# at >= 16 MiB): the memory's streaming rates, a copy out of another process
# against memcpy, and ddl's two_shot (through the stages; reading the peers)
# beside MPI_Allreduce with ddl-bench's floor (every rank copying its own
# buffer: 2 n S of traffic, the least any all-reduce causes), 3 rounds.
#   run.sh BUILD   (a build folder holding bench/ddl-bench; writes here)
set -euo pipefail
build=$(realpath "$1")
cd "$(dirname "$0")"
tmp=$(mktemp -d)
g++ -O3 -march=native -pthread stream.cpp -o "$tmp/stream"
g++ -O2 cma_copy.cpp -o "$tmp/cma_copy"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
{ lscpu | grep 'Model name'; nproc; } > machine.txt
for r in 1 2 3; do
  { for s in 16 128; do "$tmp/stream" $s 1; "$tmp/stream" $s 2; done; } > stream-r$r.txt
  { for s in 16 128; do for p in 256 $((s * 1024)); do "$tmp/cma_copy" $s $p; done; done; } > cma-r$r.txt
  mpirun -n 2 "${m[@]}" "$build/bench/ddl-bench" --transport mpi --strategy two_shot,two_shot_read,auto --baseline mpi \
    --collective all_reduce -b 16M -e 128M -f 8 -n 5 -w 2 > bench-r$r.txt 2>&1
done
rm -rf "$tmp"
