#!/usr/bin/env bash
# The README's three headline figures, each min / median / max of RUNS runs
# (default 5), with the command of each run stamped in its raw file:
#   1. all-reduce in place, 4 Open MPI ranks on one machine, 16 and 64 MiB:
#      ddl auto against MPI_Allreduce in the same job (ddl-bench --baseline mpi);
#   2. bucketed asynchronous all-reduce hiding behind an emulated ResNet-50
#      backward pass, 4 Open MPI ranks (ddl-async-bench overlap): the share of
#      the all-reduce left exposed, at compute = 1x and 1.5x the all-reduce;
#   3. torch.distributed all_reduce through the "ddl" backend against gloo,
#      4 ranks under torchrun, 16 and 64 MiB (bench/torch/collectives.py),
#      with the torch of PYTHON (default the torch 2.x build's venv).
# usage: bench/tools/headline_runs.sh [build dir] [runs] [out dir]
# then:  bench/tools/headline_summary.py OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-5}
out=${3:-bench/results/headline-raw/$(date -u +%F)}
python=${PYTHON:-build/venv-torch2/bin/python3}
torch_pkg=${TORCH_PKG:-build/torch2/integrations/torch}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpiexec -n 4 --oversubscribe --mca mpi_yield_when_idle 1 --bind-to none)
stamp() { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; }
for run in $(seq 1 "$runs"); do
  echo "== run $run of $runs"
  cmd=("${mpirun[@]}" "$build/bench/ddl-bench" --transport mpi --baseline mpi --strategy auto -b 16M -e 64M -f 4 -n 10 -w 2)
  { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/mpi-n4-run$run.txt"
  cmd=("${mpirun[@]}" "$build/bench/ddl-async-bench" overlap --transport mpi -n 3 -w 1 --ratios 1,1.5)
  { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/overlap-resnet50-mpi-n4-run$run.txt"
  if [ -x "$python" ] && [ -d "$torch_pkg" ]; then
    cmd=("$python" -m torch.distributed.run --standalone --nproc-per-node=4 bench/torch/collectives.py
         --collective all_reduce -b 16M -e 64M -f 4 -n 5 -w 1)
    { stamp "PYTHONPATH=$torch_pkg ${cmd[*]}"; PYTHONPATH=$torch_pkg "${cmd[@]}" 2>&1 | grep -v "^\*\|OMP_NUM"; } \
      > "$out/torch-all_reduce-n4-run$run.txt"
  fi
done
echo "raw runs in $out"
