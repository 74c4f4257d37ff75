#!/usr/bin/env bash
# The GPU-side checks of the CUDA back-end, run on a machine with a GPU.
# usage: bench/tools/gpu_checks.sh OUTDIR PHASE...   (from the repository root)
#   build     configure build/gpu (MPI only when found) and build the CUDA targets;
#             with DDL_GPU_PREBUILT=DIR (binaries built elsewhere for sm_90:
#             ddl_test_cuda, ddl-gpu-bench, ddl-gpu-mpi-bench,
#             ddl_example_allreduce_cuda, and libcudart beside them) those are
#             used when they run here, and nothing is built; DDL_GPU_CMAKE_ARGS
#             adds configure arguments (-DCMAKE_PREFIX_PATH=... for doctest)
#   test      ddl_test_cuda (CTest's 'cuda'), ctest staged + the CUDA example -> tests.log
#   sanitize  compute-sanitizer memcheck and racecheck on ddl_test_cuda -> sanitizer.log
#   bench     ddl-gpu-bench reduce (both engines, 4 dtypes) and allreduce (ring,
#             auto with the plan it ran, one_shot, two_shot whole and through
#             messages, recursive and halving doubling; 8 B-32 KiB and
#             1 MiB-1 GiB), the 8-byte call's floor (ddl-gpu-bench launch: an
#             empty kernel per rank, with and without the host meetings, beside
#             one_shot and auto at 8 B), and
#             ddl-gpu-mpi-bench over 4 MPI processes when MPI is there (as
#             given, and with every size bounced through host memory)
#             -> reduce.txt, allreduce-*.txt, launch.txt, mpi-staged.txt, mpi-bounce-all.txt
#   ipc       near ranks (CUDA IPC between MPI processes of one host): ddl_test_cuda_mpi's
#             matrix over 2, 3, 4, 8 processes, memcheck, ddl-gpu-mpi-bench with and without
#             IPC, the emulated two-level job -> ipc-tests.log, ipc-sanitizer.log, ipc-bench.txt
# Every step has its own time limit; machine.txt records the GPU, driver,
# toolkit and commit. Each phase's exit status is printed; the script exits
# non-zero when any step failed.
set -u
out=${1:?usage: gpu_checks.sh OUTDIR PHASE...}
shift
build=${DDL_GPU_BUILD:-build/gpu}
mkdir -p "$out"
status=0
test_bin=$build/test/ddl_test_cuda
bench_bin=$build/bench/ddl-gpu-bench
mpi_bench_bin=$build/bench/ddl-gpu-mpi-bench
ipc_test_bin=$build/test/ddl_test_cuda_mpi
example_bin=$build/examples/ddl_example_allreduce_cuda
prebuilt=no

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
      pre=${DDL_GPU_PREBUILT:-}
      if [ -n "$pre" ] && LD_LIBRARY_PATH="$pre:${LD_LIBRARY_PATH:-}" "$pre/ddl_test_cuda" --list-test-cases \
          > "$out/prebuilt.log" 2>&1; then
        export LD_LIBRARY_PATH="$pre:${LD_LIBRARY_PATH:-}"
        test_bin=$pre/ddl_test_cuda bench_bin=$pre/ddl-gpu-bench mpi_bench_bin=$pre/ddl-gpu-mpi-bench
        ipc_test_bin=$pre/ddl_test_cuda_mpi
        example_bin=$pre/ddl_example_allreduce_cuda prebuilt=yes
        echo "== build: using the binaries in $pre" | tee -a "$out/build.log"
        continue
      fi
      mpi=OFF
      command -v mpicxx > /dev/null && mpi=ON
      step configure 180 "$out/build.log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DDDL_ENABLE_CUDA=ON -DDDL_ENABLE_MPI=$mpi ${DDL_GPU_CMAKE_ARGS:-}
      targets="ddl_test_cuda ddl_test_staged ddl-gpu-bench ddl_example_allreduce_cuda"
      [ "$mpi" = ON ] && targets="$targets ddl-gpu-mpi-bench ddl_test_cuda_mpi"
      # shellcheck disable=SC2086
      step build 400 "$out/build.log" cmake --build "$build" -j "$(nproc)" --target $targets
      ;;
    test)
      # ddl_test_cuda is CTest's 'cuda' test; run directly, one test case at a
      # time under its own limit (DDL_GPU_CASE_LIMIT, 120 s), so a case that
      # hangs costs its limit and the others still run (a deadlock once ate a
      # whole lease). DDL_TIMEOUT=20 bounds each wait inside a case too.
      "$test_bin" --list-test-cases --no-intro 2> /dev/null | grep '^cuda:' > "$out/cases.txt"
      k=0
      while IFS= read -r tc; do
        k=$((k + 1))
        # doctest's filters take wildcards: escape its separators and brackets by '?'
        pattern=$(printf '%s' "$tc" | sed 's/[],[]/?/g')
        step "test_cuda_$k" "${DDL_GPU_CASE_LIMIT:-120}" "$out/tests.log" env DDL_TIMEOUT=20 "$test_bin" \
          --duration=true "--test-case=$pattern"
      done < "$out/cases.txt"
      step test_cuda_cub 120 "$out/tests.log" env DDL_TIMEOUT=20 DDL_CUDA_REDUCE=cub \
        "$test_bin" --duration=true '-tc=*random floats*,*staging*,*DDL_CUDA_REDUCE*,*asynchronous*,*flagged*'
      if [ "$prebuilt" = yes ]; then
        step example 60 "$out/tests.log" "$example_bin"
      else
        step ctest 120 "$out/tests.log" ctest --test-dir "$build" -R 'staged|example.allreduce_cuda' \
          --output-on-failure --timeout 100
      fi
      ;;
    sanitize)
      step memcheck 240 "$out/sanitizer.log" compute-sanitizer --tool memcheck --leak-check full \
        --error-exitcode 3 "$test_bin" -tc='*random floats*,*staging pipeline*,*misuse*,*asynchronous*,*flagged*'
      [ -n "${DDL_GPU_QUICK:-}" ] && continue  # memcheck only
      step racecheck 180 "$out/sanitizer.log" compute-sanitizer --tool racecheck --error-exitcode 3 \
        "$test_bin" -tc='*device reductions*'
      step synccheck 120 "$out/sanitizer.log" compute-sanitizer --tool synccheck --error-exitcode 3 \
        "$test_bin" -tc='*random floats*'
      ;;
    bench)
      # Both device-reduction engines (ddl's kernel, CCCL's cub) beside a D2D copy, per dtype.
      # The all-reduce: small (latency) and large (bandwidth) per strategy.
      for st in two_shot one_shot ring auto recursive_doubling halving_doubling; do
        step "allreduce_${st}_small" 60 "$out/allreduce-$st.txt" "$bench_bin" allreduce \
          --ranks 2,4,8 --strategy "$st" -b 8 -e 32K -f 8 -n 20
        step "allreduce_${st}_large" 150 "$out/allreduce-$st.txt" "$bench_bin" allreduce \
          --ranks 2,4,8 --strategy "$st" -b 1M -e "${DDL_GPU_LARGEST:-1G}" -f 4 -n 10
      done
      # two_shot through messages (no flag regions' calls) beside the whole calls above
      step allreduce_two_shot_messages_small 60 "$out/allreduce-two_shot-messages.txt" env DDL_CUDA_FLAGGED=0 \
        "$bench_bin" allreduce --ranks 2,4,8 --strategy two_shot -b 8 -e 32K -f 8 -n 20
      step allreduce_two_shot_messages_large 150 "$out/allreduce-two_shot-messages.txt" env DDL_CUDA_FLAGGED=0 \
        "$bench_bin" allreduce --ranks 2,4,8 --strategy two_shot -b 1M -e "${DDL_GPU_LARGEST:-1G}" -f 4 -n 10
      step launch 60 "$out/launch.txt" "$bench_bin" launch --ranks 1,2,4,8 -n 500
      for d in float half bfloat16 double; do
        step "reduce_$d" 120 "$out/reduce.txt" "$bench_bin" reduce -d "$d" -b 1M -e 1G -f 4 -n 20
      done
      if [ -x "$mpi_bench_bin" ] && command -v mpirun > /dev/null; then
        # As given (calls up to 64 MiB bounce through host memory) beside piece
        # by piece; then with every size bounced, to place the default.
        step mpi_staged 150 "$out/mpi-staged.txt" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
          mpirun -n 4 --oversubscribe -x LD_LIBRARY_PATH "$mpi_bench_bin" -b 64K -e 256M -f 4 -n 10
        step mpi_bounce_all 150 "$out/mpi-bounce-all.txt" env OMPI_ALLOW_RUN_AS_ROOT=1 \
          OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DDL_STAGING_BOUNCE=1G mpirun -n 4 --oversubscribe -x LD_LIBRARY_PATH \
          -x DDL_STAGING_BOUNCE "$mpi_bench_bin" -b 1M -e 256M -f 4 -n 10
      fi
      ;;
    ipc)
      # Near ranks (processes of one host, device memory shared by CUDA IPC):
      # the device collective matrix over 2, 3, 4 and 8 MPI processes on the
      # one GPU, memcheck, and device buffers over MPI with and without IPC
      # (auto, and two_shot and one_shot reading the peers' buffers in place);
      # the emulated two-level job (pairs of processes as "hosts",
      # DDL_MPI_SHM_RANKS=2): the multi-ring over pairs beside the flat ring
      # and staging everything -> ipc-tests.log, ipc-sanitizer.log, ipc-bench.txt
      mpirun_as="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -x LD_LIBRARY_PATH"
      for n in 2 3 4; do
        step "ipc_matrix_n$n" 120 "$out/ipc-tests.log" $mpirun_as -n "$n" "$ipc_test_bin" --strategy ring
      done
      step ipc_matrix_n8 120 "$out/ipc-tests.log" $mpirun_as -n 8 "$ipc_test_bin" --strategy ring --quick
      for st in halving recursive multi_ring multi_ring_direct auto two_shot one_shot; do
        step "ipc_matrix_n4_$st" 90 "$out/ipc-tests.log" $mpirun_as -n 4 "$ipc_test_bin" --strategy "$st" --quick
      done
      step ipc_bench 180 "$out/ipc-bench.txt" $mpirun_as -n 4 "$mpi_bench_bin" -b 64K -e 256M -f 4 -n 10
      step ipc_bench_8B 60 "$out/ipc-bench.txt" $mpirun_as -n 4 "$mpi_bench_bin" -b 8 -e 8 -n 200
      step ipc_bench_two_shot 180 "$out/ipc-bench.txt" $mpirun_as -n 4 "$mpi_bench_bin" --strategy two_shot \
        -b 1M -e 256M -f 4 -n 10
      step ipc_bench_one_shot 90 "$out/ipc-bench.txt" $mpirun_as -x DDL_STAGING_NEAR_BOUNCE=0 -n 4 \
        "$mpi_bench_bin" --strategy one_shot -b 8 -e 4M -f 8 -n 50
      for st in multi_ring multi_ring_direct ring; do
        step "ipc_two_level_$st" 120 "$out/ipc-bench.txt" $mpirun_as -x DDL_MPI_SHM_RANKS=2 -n 4 \
          "$mpi_bench_bin" --strategy "$st" -b 1M -e 256M -f 4 -n 10
      done
      step ipc_memcheck 180 "$out/ipc-sanitizer.log" $mpirun_as -n 2 compute-sanitizer --tool memcheck \
        --error-exitcode 3 "$ipc_test_bin" --strategy ring --quick
      ;;
    *)
      echo "gpu_checks.sh: unknown phase '$phase' (build, test, sanitize, bench, ipc)" >&2
      exit 2
      ;;
  esac
done
exit $status
