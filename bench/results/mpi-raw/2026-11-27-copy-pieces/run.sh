#!/usr/bin/env bash
# host::copy in pieces where glibc's rep movsb is slow (AMD Zen, destination
# 1-63 bytes past the source modulo 4 KiB): old and new ddl-bench in turns,
# Open MPI 4.1.4 at 2 and 4 ranks with glibc's default malloc (no tunables:
# buffers of 128 KiB and more come from mmap, 16 bytes into a page, as a
# user's std::vector does), every collective; and 4 threads.
#   run.sh OLD_BENCH NEW_BENCH OUTDIR   (RANKS="8" COLLECTIVES="broadcast all_reduce all_gather": those only, no threads)
set -euo pipefail
old=${1:?usage: run.sh OLD_BENCH NEW_BENCH OUTDIR}
new=${2:?usage: run.sh OLD_BENCH NEW_BENCH OUTDIR}
out=${3:?usage: run.sh OLD_BENCH NEW_BENCH OUTDIR}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--strategy auto -b 8 -e 16M -f 8 -n 20 -w 3)
for rep in 1 2 3; do
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    for c in ${COLLECTIVES:-broadcast all_gather all_reduce reduce_scatter}; do
      for n in ${RANKS:-2 4}; do
        mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 "$bin" --transport mpi --baseline mpi \
          --collective "$c" "${common[@]}" > "$out/${which}_mpi_${c}_n${n}_run$rep.txt" 2>&1
      done
    done
    [ -z "${RANKS:-}" ] && "$bin" --ranks 4 "${common[@]}" > "$out/${which}_threads_all_reduce_n4_run$rep.txt" 2>&1
    true
  done
done
