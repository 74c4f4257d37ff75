#!/usr/bin/env bash
# Re-runs every figure in bench/results/async-overlap.md: the overlap of
# bucketed asynchronous all-reduce with an emulated backward pass (ResNet-50
# and transformer gradient lists), the async-vs-blocking overhead, and
# broadcast against MPI_Bcast; threads and Open MPI at 2, 4 and 8 ranks.
# usage: bench/tools/async_runs.sh [build dir] [runs]   (writes bench/results/async-raw/)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-3}
bench=$build/bench/ddl-async-bench
out=bench/results/async-raw
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpiexec --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader)
stamp() { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; }
for run in $(seq 1 "$runs"); do
  for n in 2 4 8; do
    f=$out/overlap-resnet50-mpi-n$n-run$run.txt
    { stamp "${mpirun[*]} -n $n $bench overlap --transport mpi -n 3 -w 1 --ratios 0,1,1.5"
      "${mpirun[@]}" -n $n "$bench" overlap --transport mpi -n 3 -w 1 --ratios 0,1,1.5; } > "$f"
    f=$out/overlap-resnet50-local-n$n-run$run.txt
    { stamp "$bench overlap --ranks $n -n 3 -w 1 --ratios 0,1,1.5"
      "$bench" overlap --ranks $n -n 3 -w 1 --ratios 0,1,1.5; } > "$f"
  done
  f=$out/overlap-resnet50-separate-mpi-n4-run$run.txt
  { stamp "${mpirun[*]} -n 4 $bench overlap --transport mpi --separate -n 3 -w 1 --ratios 0,1,1.5"
    "${mpirun[@]}" -n 4 "$bench" overlap --transport mpi --separate -n 3 -w 1 --ratios 0,1,1.5; } > "$f"
  f=$out/overhead-mpi-n4-run$run.txt
  { stamp "${mpirun[*]} -n 4 $bench overhead --transport mpi -n 20 -w 3 -b 8 -e 64M -f 8"
    "${mpirun[@]}" -n 4 "$bench" overhead --transport mpi -n 20 -w 3 -b 8 -e 64M -f 8; } > "$f"
  f=$out/overhead-local-n4-run$run.txt
  { stamp "$bench overhead --ranks 4 -n 20 -w 3 -b 8 -e 64M -f 8"
    "$bench" overhead --ranks 4 -n 20 -w 3 -b 8 -e 64M -f 8; } > "$f"
  f=$out/broadcast-mpi-n4-run$run.txt
  { stamp "${mpirun[*]} -n 4 $bench broadcast --transport mpi -n 10 -w 2 -b 4K -e 64M -f 4"
    "${mpirun[@]}" -n 4 "$bench" broadcast --transport mpi -n 10 -w 2 -b 4K -e 64M -f 4; } > "$f"
done
f=$out/overlap-transformer-mpi-n4.txt
{ stamp "${mpirun[*]} -n 4 $bench overlap --transport mpi --model transformer -n 2 -w 1 --ratios 0,1,1.5"
  "${mpirun[@]}" -n 4 "$bench" overlap --transport mpi --model transformer -n 2 -w 1 --ratios 0,1,1.5; } > "$f"
echo "wrote $out"
