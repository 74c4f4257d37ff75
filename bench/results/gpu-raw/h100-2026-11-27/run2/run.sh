#!/bin/bash
# The 2026-11-27 device run 2: flagged_two_shot with two blocks a
# multiprocessor and unrolled loads; tests, then the sweeps side by side.
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin DDL_GPU_CASE_LIMIT=75
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R build test; echo "tests done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3; do
  for st in two_shot auto one_shot ring halving_doubling recursive_doubling; do
    timeout 60 $B allreduce --ranks 2,4,8 --strategy $st -b 1M -e 256M -f 4 -n 10 > $R/rep$i-$st.txt 2>&1
    timeout 60 $B allreduce --ranks 2,4,8 --strategy $st -b 8 -e 32K -f 8 -n 20 >> $R/rep$i-$st.txt 2>&1
  done
  DDL_CUDA_FLAGGED=0 timeout 60 $B allreduce --ranks 2,4,8 --strategy two_shot -b 1M -e 256M -f 4 -n 10 > $R/rep$i-two_shot-messages.txt 2>&1
  DDL_CUDA_FLAGGED=0 timeout 60 $B allreduce --ranks 2,4,8 --strategy two_shot -b 8 -e 32K -f 8 -n 20 >> $R/rep$i-two_shot-messages.txt 2>&1
  timeout 60 $B allreduce --ranks 4 --strategy two_shot -b 1G -e 1G -n 5 >> $R/rep$i-two_shot.txt 2>&1
  DDL_CUDA_FLAGGED=0 timeout 60 $B allreduce --ranks 4 --strategy two_shot -b 1G -e 1G -n 5 >> $R/rep$i-two_shot-messages.txt 2>&1
done
echo "reps done after $((SECONDS - t0)) s"; pack
timeout -k 5 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 .gpubin/ddl_test_cuda \
  -tc='*flagged*,*random floats*' > $R/memcheck.log 2>&1
echo "memcheck exit $? after $((SECONDS - t0)) s" | tee -a $R/memcheck.log; pack
grep -h "exit" $R/*.log 2>/dev/null | grep -v "exit 0" | head -20
