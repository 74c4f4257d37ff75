#!/usr/bin/env bash
# A direct strategy's synchronisation round over MPI priced as one latency
# (mpi_transport::direct_round_one_step) against ceil(log2 n) latencies:
# ddl-bench of the commit before (OLD) and after (NEW) in turns, auto beside
# one_shot, two_shot and MPI_Allreduce, 4 and 8 ranks, 16 KiB-1 MiB, calls
# timed in batches of 5.
# usage: run.sh OLD_BENCH NEW_BENCH OUT_DIR [RUNS]
set -euo pipefail
old=${1:?old ddl-bench}; new=${2:?new ddl-bench}; out=${3:?out dir}; runs=${4:-3}
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
mkdir -p "$out"
for run in $(seq "$runs"); do
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    for n in 4 8; do
      mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
        "$bin" --transport mpi --strategy auto,one_shot,two_shot --baseline mpi \
        -b 16K -e 1M -f 2 -n 30 -w 5 --batch 5 > "$out/${which}_n${n}_run$run.txt"
    done
  done
done
