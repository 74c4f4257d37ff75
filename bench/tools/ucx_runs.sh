#!/usr/bin/env bash
# ddl over UCX beside ddl over MPI and MPI_Allreduce, all-reduce (float sum),
# 4 KiB .. 256 MiB, at 2, 4 and 8 ranks on this machine: for each rank count
# one job over UCX (ranks meet through an mpi_store, MPI_Allreduce in the same
# job) and one over MPI, back to back. bench/tools/ucx_table.py and ucx_plot.sh read the CSVs (bench/results/ucx.md).
#   bench/tools/ucx_runs.sh [build dir] [out dir]
set -euo pipefail
build=${1:-build/release}
out=${2:-bench/results/ucx-raw}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
common=(-b 4K -e 256M -f 4 -n 5 -w 2 --strategy auto --csv)
# The CSVs' first line says what made them (ucx_table.py's provenance line reads it).
stamp() { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; }
for n in ${DDL_UCX_RANKS:-2 4 8}; do
  echo "== $n ranks: ddl over UCX, MPI_Allreduce beside it"
  stamp "mpirun -n $n ddl-bench --transport ucx --baseline mpi ${common[*]}" > "$out/ucx-n$n.csv"
  timeout 900 mpirun.openmpi -n "$n" "$build/bench/ddl-bench" --transport ucx --baseline mpi "${common[@]}" \
    2>/dev/null | grep -v '^\[' >> "$out/ucx-n$n.csv"
  echo "== $n ranks: ddl over MPI"
  stamp "mpirun -n $n ddl-bench --transport mpi ${common[*]}" > "$out/mpi-n$n.csv"
  timeout 900 mpirun.openmpi -n "$n" "$build/bench/ddl-bench" --transport mpi "${common[@]}" \
    2>/dev/null >> "$out/mpi-n$n.csv"
done
