#!/usr/bin/env bash
# The GPU-side checks of the CUDA back-end, run on a machine with a GPU.
# usage: bench/tools/gpu_checks.sh OUTDIR PHASE...   (from the repository root)
#   build     configure build/gpu (MPI only when found) and build the CUDA targets
#   test      ddl_test_cuda (CTest's 'cuda'), ctest staged + the CUDA example -> tests.log
#   sanitize  compute-sanitizer memcheck and racecheck on ddl_test_cuda -> sanitizer.log
#   bench     ddl-gpu-bench reduce (both engines, 4 dtypes) and allreduce (ring, auto)
#             -> reduce.txt, allreduce-*.txt
# Every step has its own time limit; machine.txt records the GPU, driver,
# toolkit and commit. Each phase's exit status is printed; the script exits
# non-zero when any step failed.
set -u
out=${1:?usage: gpu_checks.sh OUTDIR PHASE...}
shift
build=${DDL_GPU_BUILD:-build/gpu}
mkdir -p "$out"
status=0

# step NAME LIMIT_S LOG CMD...: run CMD under a time limit, appending to LOG.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  echo "== $name: $*" >> "$log"
  timeout -k 10 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
  [ "$rc" -eq 0 ] || status=1
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -5
  nvcc --version 2>&1 | tail -2
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "mpi: $(command -v mpicxx || echo none)"
} > "$out/machine.txt"

for phase in "$@"; do
  case $phase in
    build)
      mpi=OFF
      command -v mpicxx > /dev/null && mpi=ON
      step configure 180 "$out/build.log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DDDL_ENABLE_CUDA=ON -DDDL_ENABLE_MPI=$mpi
      step build 400 "$out/build.log" cmake --build "$build" -j "$(nproc)" --target \
        ddl_test_cuda ddl_test_staged ddl-gpu-bench ddl_example_allreduce_cuda
      ;;
    test)
      # ddl_test_cuda is CTest's 'cuda' test; run directly for its per-case durations.
      step test_cuda 360 "$out/tests.log" env DDL_TIMEOUT=60 "$build/test/ddl_test_cuda" --duration=true
      step test_cuda_cub 360 "$out/tests.log" env DDL_TIMEOUT=60 DDL_CUDA_REDUCE=cub "$build/test/ddl_test_cuda" \
        --duration=true '-tc=*collective*,*random floats*,*staging*,*DDL_CUDA_REDUCE*'
      step ctest 120 "$out/tests.log" ctest --test-dir "$build" -R 'staged|example.allreduce_cuda' \
        --output-on-failure --timeout 100
      ;;
    sanitize)
      step memcheck 240 "$out/sanitizer.log" compute-sanitizer --tool memcheck --leak-check full \
        --error-exitcode 3 "$build/test/ddl_test_cuda" -tc='*random floats*,*staging pipeline*,*misuse*'
      step racecheck 180 "$out/sanitizer.log" compute-sanitizer --tool racecheck --error-exitcode 3 \
        "$build/test/ddl_test_cuda" -tc='*device reductions*'
      step synccheck 120 "$out/sanitizer.log" compute-sanitizer --tool synccheck --error-exitcode 3 \
        "$build/test/ddl_test_cuda" -tc='*random floats*'
      ;;
    bench)
      # Both device-reduction engines (ddl's kernel, CCCL's cub) beside a D2D copy, per dtype.
      for d in float half bfloat16 double; do
        step "reduce_$d" 120 "$out/reduce.txt" "$build/bench/ddl-gpu-bench" reduce -d "$d" -b 1M -e 1G -f 4 -n 20
      done
      step allreduce_ring 240 "$out/allreduce-ring.txt" "$build/bench/ddl-gpu-bench" allreduce \
        --ranks 2,4,8 --strategy ring -b 1M -e 1G -f 4 -n 10
      step allreduce_auto 200 "$out/allreduce-auto.txt" "$build/bench/ddl-gpu-bench" allreduce \
        --ranks 2,4,8 --strategy auto -b 1M -e 1G -f 4 -n 10
      ;;
    *)
      echo "gpu_checks.sh: unknown phase '$phase' (build, test, sanitize, bench)" >&2
      exit 2
      ;;
  esac
done
exit $status
