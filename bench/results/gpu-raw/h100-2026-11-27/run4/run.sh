#!/bin/bash
# The 2026-11-27 device run 4: one_shot's flagged kernel with a block per
# 4 KiB (up to 16); tests, then one_shot, two_shot (whole) and auto at 8 B-1 MiB
# three times, the 8-byte all-reduce with 200 calls, memcheck on the flagged cases.
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin DDL_GPU_CASE_LIMIT=75
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R build test; echo "tests done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3; do
  for st in one_shot two_shot auto; do
    timeout 60 $B allreduce --ranks 2,4,8 --strategy $st -b 8 -e 1M -f 2 -n 20 > $R/rep$i-$st.txt 2>&1
    timeout 60 $B allreduce --ranks 2,4,8 --strategy $st -b 8 -e 8 -n 200 > $R/rep$i-$st-8B.txt 2>&1
  done
done
echo "reps done after $((SECONDS - t0)) s"; pack
timeout -k 5 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 .gpubin/ddl_test_cuda \
  -tc='*flagged*,*random floats*' > $R/memcheck.log 2>&1
echo "memcheck exit $? after $((SECONDS - t0)) s" | tee -a $R/memcheck.log; pack
grep -h "exit" $R/*.log 2>/dev/null | grep -v "exit 0" | head -20
