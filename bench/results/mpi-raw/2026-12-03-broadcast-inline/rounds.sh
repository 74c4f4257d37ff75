#!/usr/bin/env bash
# More rounds of one cell group, in turns, at 3-decimal precision (ddl-bench --csv):
#   [RANKS="2 3 4 8"] [MIN=8] [MAX=4K] [FACTOR=8] [ITERS=20] bench/results/mpi-raw/2026-12-03-broadcast-inline/rounds.sh OUT.csv BATCH BIN...
# 3 rounds of every BIN at each rank count; each line prefixed "BIN,ROUND,". Summary: rounds.py OUT.csv
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$1 batch=$2
shift 2
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
: > "$out"
for rep in 1 2 3; do for n in ${RANKS:-2 3 4 8}; do for b in "$@"; do
  mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned "$b" --transport mpi \
    --strategy auto --baseline mpi --collective broadcast -b "${MIN:-8}" -e "${MAX:-4K}" -f "${FACTOR:-8}" -n "${ITERS:-20}" -w 5 \
    --batch "$batch" --csv 2>&1 | grep -v "^#\|^size" | sed "s|^|$b,$rep,|" >> "$out"
done; done; done
