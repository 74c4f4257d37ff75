#!/usr/bin/env bash
# Reduce-scatter, all-gather and broadcast against the MPI call doing the same
# job (MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast), in one ddl-bench
# run per configuration, 3 repeats each.
#   bench/tools/collective_sweeps.sh OUTDIR [BUILD] [BUILD_MPICH]
# Open MPI (tuned malloc, as in the recorded all-reduce results) and MPICH at
# N = 2, 4, 8; MIN, MAX and FACTOR (default 8, 64M, 8) the sizes, COLLECTIVES which run
# (all_reduce too), OMPI_RANKS and MPICH_RANKS the rank counts Open MPI and MPICH
# run at (default 2 4 8 both; MPICH's own calls busy-wait at 4 and 8 on a 2-core
# machine; an empty list skips that MPI), ITERATIONS and
# WARMUP the timed and untimed samples a size (default 5 and 2), BATCH the calls
# back to back in a sample (default 1: each call between two barriers).
# Summaries: bench/tools/collective_table.py OUTDIR (all), or mpi_ratios.py on one configuration.
set -euo pipefail
out=${1:?usage: collective_sweeps.sh OUTDIR [BUILD] [BUILD_MPICH]}
build=${2:-build/release}
build_mpich=${3:-build/mpich}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
for rep in 1 2 3; do
  for c in ${COLLECTIVES:-reduce_scatter all_gather broadcast}; do
    args=(--transport mpi --strategy auto --baseline mpi --collective "$c" -b "${MIN:-8}" -e "${MAX:-64M}" -f "${FACTOR:-8}" -n "${ITERATIONS:-5}" -w "${WARMUP:-2}" --batch "${BATCH:-1}")
    for n in 2 4 8; do
      if [[ " ${OMPI_RANKS-2 4 8} " == *" $n "* ]]; then
        mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned \
          "$build/bench/ddl-bench" "${args[@]}" > "$out/ompi_${c}_n${n}_run$rep.txt" 2>&1
      fi
      if [ -x "$build_mpich/bench/ddl-bench" ] && [[ " ${MPICH_RANKS:-2 4 8} " == *" $n "* ]]; then
        mpiexec.mpich -n "$n" "$build_mpich/bench/ddl-bench" "${args[@]}" > "$out/mpich_${c}_n${n}_run$rep.txt" 2>&1
      fi
    done
  done
done
