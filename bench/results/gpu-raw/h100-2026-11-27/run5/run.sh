#!/bin/bash
# The 2026-11-27 device run 5: the final code (flagged_latency 0.5): tests,
# auto at 8 B-1 MiB (factor 2) and 1-256 MiB three times, the 8-byte call.
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin DDL_GPU_CASE_LIMIT=75
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R build test; echo "tests done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3; do
  timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 8 -e 512K -f 2 -n 20 > $R/rep$i-auto.txt 2>&1
  timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 1M -e 256M -f 4 -n 10 >> $R/rep$i-auto.txt 2>&1
  timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 8 -e 8 -n 200 > $R/rep$i-auto-8B.txt 2>&1
done
echo "reps done after $((SECONDS - t0)) s"; pack
grep -h "exit" $R/*.log 2>/dev/null | grep -v "exit 0" | head -20
