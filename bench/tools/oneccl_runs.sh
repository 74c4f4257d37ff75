#!/usr/bin/env bash
# ddl beside Intel's oneCCL on this machine's CPUs (bench/results/oneccl.md).
#   bench/tools/oneccl_runs.sh OUTDIR [REPEATS]        (from the repository root)
# Needs build/oneccl (ddl-bench built against the Intel MPI of
# build/venv-oneccl, with DDL_ONECCL_ROOT; ./quickstart.sh oneccl makes both)
# and build/release (ddl-bench over Open MPI, with Gloo).
# Per repeat, for 2, 4 and 8 ranks:
#   - one job under Intel MPI's mpiexec per collective (all_reduce,
#     reduce_scatter, all_gather): ddl auto, Intel MPI's call, oneCCL
#     -> oneccl_COLL_nN_runR.txt
#   - one job under Open MPI (all_reduce): ddl auto, Open MPI's
#     MPI_Allreduce, Gloo -> ompi_all_reduce_nN_runR.txt
# 4 KiB-MAX (default 256M) by 4x, float32 sum, 5 timed calls after 1 warm-up.
# oneCCL over Intel MPI's shared memory (CCL_ATL_TRANSPORT=mpi,
# I_MPI_FABRICS=shm); ranks that outnumber the cores (4, 8 on 2) unpinned,
# yielding while they wait (I_MPI_PIN=0 I_MPI_WAIT_MODE=1 CCL_YIELD=sched_yield:
# pinned and spinning, 4 ranks took 8-40 ms a call at every size).
set -euo pipefail
out=${1:?usage: oneccl_runs.sh OUTDIR [REPEATS]}
reps=${2:-3}
venv=${DDL_ONECCL_VENV:-build/venv-oneccl}
mkdir -p "$out"
args=(--transport mpi --strategy auto -b 4K -e "${MAX:-256M}" -f 4 -n 5 -w 1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rep in $(seq 1 "$reps"); do
  for n in 2 4 8; do
    crowd=()
    [ "$n" -gt "$(nproc)" ] && crowd=(I_MPI_PIN=0 I_MPI_WAIT_MODE=1 CCL_YIELD=sched_yield)
    for coll in all_reduce reduce_scatter all_gather; do
      echo "== run $rep, $n ranks, $coll: oneCCL job"
      env LD_LIBRARY_PATH="$venv/lib" CCL_ATL_TRANSPORT=mpi I_MPI_FABRICS=shm "${crowd[@]}" \
        "$venv/bin/mpiexec" -n "$n" build/oneccl/bench/ddl-bench "${args[@]}" --collective "$coll" \
        --baseline mpi,oneccl 2>&1 | grep -v CCL_WARN > "$out/oneccl_${coll}_n${n}_run$rep.txt"
    done
    echo "== run $rep, $n ranks: Open MPI job"
    mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 build/release/bench/ddl-bench "${args[@]}" \
      --baseline mpi,gloo > "$out/ompi_all_reduce_n${n}_run$rep.txt" 2>&1
  done
done
