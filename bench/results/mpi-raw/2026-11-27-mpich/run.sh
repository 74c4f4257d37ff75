#!/usr/bin/env bash
# MPICH 4.0.2 at 2 ranks: every collective against its MPI call, 8 B-64 MiB,
# in place and out of place, 3 repeats (issue 21's MPICH goal; 4 and 8 ranks
# on this 2-core machine measure MPICH's busy-waiting, see 2026-11-23).
#   bench/results/mpi-raw/2026-11-27-mpich/run.sh BUILD_MPICH OUTDIR
# BUILD_MPICH: a build against MPICH holding bench/ddl-bench, e.g.
#   cmake -S . -B build/mpich-bench -DCMAKE_BUILD_TYPE=Release -DDDL_BUILD_TESTS=OFF -DDDL_BUILD_EXAMPLES=OFF \
#     -DDDL_ENABLE_CUDA=OFF -DDDL_BUILD_TORCH=OFF -DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
#   cmake --build build/mpich-bench --target ddl-bench
set -euo pipefail
build=${1:?usage: run.sh BUILD_MPICH OUTDIR}
out=${2:?usage: run.sh BUILD_MPICH OUTDIR}
mkdir -p "$out"
for rep in 1 2 3; do
  for c in all_reduce reduce_scatter all_gather broadcast; do
    mpiexec.mpich -n 2 "$build/bench/ddl-bench" --transport mpi --strategy auto --baseline mpi --collective "$c" \
      -b 8 -e 64M -f 8 -n 5 -w 2 > "$out/mpich_${c}_n2_run$rep.txt" 2>&1
  done
done
