#!/usr/bin/env bash
# Small broadcasts through the stages: old (every rank meets every other per piece) against new
# (from 3 ranks the root writes into its ring and goes on; readers wait for the root), in turns,
# back to back (--batch 50) and one call between barriers (--batch 1), threads and Open MPI at
# 2/3/4/8 ranks, MPICH at 2 (2 ranks take the meeting in both: a control):
#   [RANKS="2 3 4 8"] [MIN=8] [MAX=64K] [FACTOR=8] [THREADS=1] \
#   bench/results/mpi-raw/2026-12-03-broadcast-ring/run.sh OLD NEW OLD_MPICH NEW_MPICH [ROUNDS] [OUT]
# (each a ddl-bench binary; THREADS=0 leaves the threads out). Summary: summarize.py OUT
set -euo pipefail
old=$1 new=$2 old_mpich=$3 new_mpich=$4 rounds=${5:-3}
here=${6:-$(dirname "$0")}
mkdir -p "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
sizes=(-b "${MIN:-8}" -e "${MAX:-64K}" -f "${FACTOR:-8}")
args=(--transport mpi --strategy auto --baseline mpi --collective broadcast "${sizes[@]}")
for r in $(seq 1 "$rounds"); do
  for v in old new; do
    bin=$old; [ $v = new ] && bin=$new
    mbin=$old_mpich; [ $v = new ] && mbin=$new_mpich
    for n in ${RANKS:-2 3 4 8}; do
      if [ "${THREADS:-1}" = 1 ]; then
        "$bin" --transport local --ranks $n --strategy auto --collective broadcast "${sizes[@]}" -n 20 -w 5 --batch 50 \
          > "$here/threads-batch-$v-n$n-r$r.txt" 2>&1
        "$bin" --transport local --ranks $n --strategy auto --collective broadcast "${sizes[@]}" -n 40 -w 10 \
          > "$here/threads-single-$v-n$n-r$r.txt" 2>&1
      fi
      mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
        "$bin" "${args[@]}" -n 20 -w 5 --batch 50 > "$here/batch-$v-n$n-r$r.txt" 2>&1
      mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
        "$bin" "${args[@]}" -n 40 -w 10 > "$here/single-$v-n$n-r$r.txt" 2>&1
    done
    mpiexec.mpich -n 2 "$mbin" "${args[@]}" -n 20 -w 5 --batch 50 > "$here/mpich-batch-$v-n2-r$r.txt" 2>&1
    mpiexec.mpich -n 2 "$mbin" "${args[@]}" -n 40 -w 10 > "$here/mpich-single-$v-n2-r$r.txt" 2>&1
  done
done
