#!/usr/bin/env bash
# All-gathers and broadcasts measured by default (DDL_TUNE_COPIES, 64M) against the model alone:
# OLD = ddl-bench of 11a13c4 (nothing measured by default), NEW = this change, in turns, REPS rounds;
# Open MPI (tuned malloc) at 2, 4, 8 ranks, MPICH at 2 (OLD_MPICH / NEW_MPICH builds).
#   run.sh OLD NEW OLD_MPICH NEW_MPICH OUT 3
#   bench/tools/collective_table.py OUT/old > OUT/old/summary.txt   (and new)
set -euo pipefail
old=$1 new=$2 old_mpich=$3 new_mpich=$4 out=$5 reps=${6:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for rep in $(seq 1 "$reps"); do
  for b in old new; do
    bin=$old mbin=$old_mpich
    [ $b = new ] && bin=$new mbin=$new_mpich
    mkdir -p "$out/$b"
    for c in all_gather broadcast; do
      args=(--transport mpi --strategy auto --baseline mpi --collective "$c" -b 8 -e 16M -f 8 -n 10 -w 3)
      for n in 2 4 8; do
        mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
          "$bin" "${args[@]}" > "$out/$b/ompi_${c}_n${n}_run$rep.txt" 2>&1
      done
      mpiexec.mpich -n 2 "$mbin" "${args[@]}" > "$out/$b/mpich_${c}_n2_run$rep.txt" 2>&1
    done
  done
done
