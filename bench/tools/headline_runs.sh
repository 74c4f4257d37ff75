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
#      with the torch of PYTHON (default the torch 2.x build's venv);
#   4. threads: 4 in-process ranks, 64 MiB, ring and auto against the
#      memory-traffic floor (ddl-bench --ranks 4, floor_eff);
#   5. oneCCL: 4 ranks, all-reduce in place, 16 and 64 MiB, ddl auto against
#      oneCCL in one Intel MPI job (build/oneccl, build/venv-oneccl; see
#      oneccl_runs.sh for the settings);
#   6. sweep: 2 and 8 Open MPI ranks, 16 and 256 MiB, ddl auto against
#      MPI_Allreduce and Gloo (the faster of its two algorithms) in one job;
#   7. shared: the same on ddl::shared_buffers (--shared-buffers), against
#      MPI_Allreduce;
#   8. ucx: 4 ranks, 16 and 256 MiB, ddl over UCX (MPI_Allreduce beside it in
#      the same job, the ranks meeting through an mpi_store) and, in a second
#      job right after, ddl over MPI.
# usage: bench/tools/headline_runs.sh [build dir] [runs] [out dir]
#        FIGURES=mpi,overlap,torch,threads,oneccl,sweep,shared,ucx (default: all) picks some.
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
figures=",${FIGURES:-mpi,overlap,torch,threads,oneccl,sweep,shared,ucx},"
want() { [[ $figures == *",$1,"* ]]; }
venv=${DDL_ONECCL_VENV:-build/venv-oneccl}
for run in $(seq 1 "$runs"); do
  echo "== run $run of $runs"
  if want mpi; then
    cmd=("${mpirun[@]}" "$build/bench/ddl-bench" --transport mpi --baseline mpi --strategy auto -b 16M -e 64M -f 4 -n 10 -w 2)
    { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/mpi-n4-run$run.txt"
  fi
  if want overlap; then
    cmd=("${mpirun[@]}" "$build/bench/ddl-async-bench" overlap --transport mpi -n 3 -w 1 --ratios 1,1.5)
    { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/overlap-resnet50-mpi-n4-run$run.txt"
  fi
  if want threads; then
    cmd=("$build/bench/ddl-bench" --ranks 4 --strategy ring,auto -b 64M -e 64M -n 10 -w 3)
    { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/threads-n4-run$run.txt"
  fi
  if want oneccl && [ -x build/oneccl/bench/ddl-bench ]; then
    cmd=("$venv/bin/mpiexec" -n 4 build/oneccl/bench/ddl-bench --transport mpi --strategy auto --baseline oneccl
         -b 16M -e 64M -f 4 -n 10 -w 2)
    { stamp "${cmd[*]}"
      env LD_LIBRARY_PATH="$venv/lib" CCL_ATL_TRANSPORT=mpi I_MPI_FABRICS=shm I_MPI_PIN=0 I_MPI_WAIT_MODE=1 \
        CCL_YIELD=sched_yield "${cmd[@]}" 2>&1 | grep -v CCL_WARN; } > "$out/oneccl-n4-run$run.txt"
  fi
  if want sweep; then
    for n in 2 8; do
      cmd=(mpiexec -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 --bind-to none "$build/bench/ddl-bench"
           --transport mpi --baseline mpi,gloo --strategy auto -b 16M -e 256M -f 16 -n 5 -w 1)
      { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/sweep-n$n-run$run.txt"
    done
  fi
  if want shared; then
    for n in 2 8; do
      cmd=(mpiexec -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 --bind-to none "$build/bench/ddl-bench"
           --transport mpi --baseline mpi --shared-buffers --strategy auto -b 16M -e 256M -f 16 -n 5 -w 1)
      { stamp "${cmd[*]}"; "${cmd[@]}"; } > "$out/shared-n$n-run$run.txt"
    done
  fi
  if want ucx; then
    for t in ucx mpi; do
      base=(); [ "$t" = ucx ] && base=(--baseline mpi)
      cmd=("${mpirun[@]}" "$build/bench/ddl-bench" --transport "$t" "${base[@]}" --strategy auto -b 16M -e 256M -f 16
           -n 5 -w 1)
      { stamp "${cmd[*]}"; "${cmd[@]}" 2> /dev/null; } > "$out/ucx-$t-n4-run$run.txt"
    done
  fi
  if want torch && [ -x "$python" ] && [ -d "$torch_pkg" ]; then
    cmd=("$python" -m torch.distributed.run --standalone --nproc-per-node=4 bench/torch/collectives.py
         --collective all_reduce -b 16M -e 64M -f 4 -n 5 -w 1)
    { stamp "PYTHONPATH=$torch_pkg ${cmd[*]}"; PYTHONPATH=$torch_pkg "${cmd[@]}" 2>&1 | grep -v "^\*\|OMP_NUM"; } \
      > "$out/torch-all_reduce-n4-run$run.txt"
  fi
done
echo "raw runs in $out"
