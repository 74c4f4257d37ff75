#!/usr/bin/env bash
# Why 2 ranks keep the meeting: the code of this commit (NEW, the meeting at 2 ranks) against the
# same code with the ring from 2 ranks (RING2: `direct_base::ring_ranks` = 2), in turns, 2 ranks,
# threads and Open MPI, back to back (--batch 50) and one call between barriers:
#   bench/results/mpi-raw/2026-12-03-broadcast-ring/two-ranks.sh NEW RING2 [ROUNDS]  -> two-ranks/
set -euo pipefail
new=$1 ring2=$2 rounds=${3:-3}
out=$(dirname "$0")/two-ranks
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
sizes=(-b 8 -e 16K -f 8)
for r in $(seq 1 "$rounds"); do
  for v in meeting ring; do
    bin=$new; [ $v = ring ] && bin=$ring2
    "$bin" --transport local --ranks 2 --strategy auto --collective broadcast "${sizes[@]}" -n 20 -w 5 --batch 50 \
      > "$out/threads-batch-$v-r$r.txt" 2>&1
    "$bin" --transport local --ranks 2 --strategy auto --collective broadcast "${sizes[@]}" -n 40 -w 10 \
      > "$out/threads-single-$v-r$r.txt" 2>&1
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned "$bin" --transport mpi \
      --strategy auto --baseline mpi --collective broadcast "${sizes[@]}" -n 20 -w 5 --batch 50 > "$out/batch-$v-r$r.txt" 2>&1
    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned "$bin" --transport mpi \
      --strategy auto --baseline mpi --collective broadcast "${sizes[@]}" -n 40 -w 10 > "$out/single-$v-r$r.txt" 2>&1
  done
done
