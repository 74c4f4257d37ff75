#!/usr/bin/env bash
# Stages faulted in when mapped (shared_stages::warm, the threads' stages written once): old and new
# binaries in turns, ROUNDS rounds (default 3), small broadcasts and all-reduces as the scoreboard's
# 8 B-16 MiB sweep takes them (5 calls a size after 2 warm-up calls, each between barriers), Open MPI
# 2/4/8 ranks, MPICH 2 ranks and threads 2/4. From the repository root:
#   bench/results/mpi-raw/2026-12-04-warm-stages/run.sh OLD NEW OLD_MPICH NEW_MPICH [ROUNDS]
# (each a ddl-bench binary), then summarize.py in this folder -> summary.txt
set -euo pipefail
here=$(dirname "$0")
old=$1 new=$2 old_mpich=$3 new_mpich=$4 rounds=${5:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
sizes=(-b 8 -e 64K -f 8 -n 5 -w 2)
for r in $(seq 1 "$rounds"); do
  for c in broadcast all_reduce; do
    args=(--strategy auto --collective "$c" "${sizes[@]}")
    for v in old new; do
      bin=$old; mbin=$old_mpich
      [ "$v" = new ] && bin=$new && mbin=$new_mpich
      for n in 2 4 8; do
        mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
          "$bin" --transport mpi --baseline mpi "${args[@]}" > "$here/ompi-$c-n$n-$v-r$r.txt" 2>&1
      done
      mpiexec.mpich -n 2 "$mbin" --transport mpi --baseline mpi "${args[@]}" > "$here/mpich-$c-n2-$v-r$r.txt" 2>&1
      for n in 2 4; do "$bin" --ranks "$n" "${args[@]}" > "$here/threads-$c-n$n-$v-r$r.txt" 2>&1; done
    done
  done
done
