#!/usr/bin/env bash
# The recorded MPI comparison: ddl (auto) vs MPI_Allreduce vs Gloo, in one
# ddl-bench run per configuration, 3 repeats each.
#   bench/tools/mpi_sweeps.sh OUTDIR [BUILD] [BUILD_MPICH]
# Open MPI at N = 2, 4, 8 with default malloc and with the glibc tunable
# that stops its per-call page faults; MPICH at N = 2, 4, 8. MAX (default
# 256M) is the largest size.
set -euo pipefail
out=${1:?usage: mpi_sweeps.sh OUTDIR [BUILD] [BUILD_MPICH]}
build=${2:-build/release}
build_mpich=${3:-build-mpich}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
args=(--transport mpi --strategy auto --baseline mpi,gloo -b 4K -e "${MAX:-256M}" -f 4 -n 5 -w 2)
for rep in 1 2 3; do
  for n in 2 4 8; do
    mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 "$build/bench/ddl-bench" "${args[@]}" \
      > "$out/ompi_n${n}_default_run$rep.txt" 2>&1
    mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$tuned "$build/bench/ddl-bench" "${args[@]}" \
      > "$out/ompi_n${n}_tuned_run$rep.txt" 2>&1
  done
  if [ -x "$build_mpich/bench/ddl-bench" ]; then
    for n in 2 4 8; do
      mpiexec.mpich -n "$n" "$build_mpich/bench/ddl-bench" "${args[@]}" > "$out/mpich_n${n}_run$rep.txt" 2>&1
    done
  fi
done
