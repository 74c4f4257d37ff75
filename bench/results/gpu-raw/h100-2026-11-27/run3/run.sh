#!/bin/bash
# The 2026-11-27 device run 3: the final code (auto's costs for whole
# two_shot calls; the test of auto against run 2's table): tests, auto's
# sweeps three times, the 8-byte all-reduce with 200 calls, memcheck on the
# flagged cases (one_shot's kernel now waits through the shared helper).
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin DDL_GPU_CASE_LIMIT=75
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R build test; echo "tests done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3; do
  timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 1M -e 256M -f 4 -n 10 > $R/rep$i-auto.txt 2>&1
  timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 8 -e 32K -f 8 -n 20 >> $R/rep$i-auto.txt 2>&1
  for st in auto one_shot; do
    timeout 60 $B allreduce --ranks 2,4,8 --strategy $st -b 8 -e 8 -n 200 > $R/rep$i-$st-8B.txt 2>&1
  done
done
echo "reps done after $((SECONDS - t0)) s"; pack
timeout -k 5 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 .gpubin/ddl_test_cuda \
  -tc='*flagged*,*random floats*' > $R/memcheck.log 2>&1
echo "memcheck exit $? after $((SECONDS - t0)) s" | tee -a $R/memcheck.log; pack
grep -h "exit" $R/*.log 2>/dev/null | grep -v "exit 0" | head -20
