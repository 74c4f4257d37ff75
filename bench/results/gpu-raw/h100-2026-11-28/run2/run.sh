#!/bin/bash
# The 2026-11-28 device run 2 (HEAD 938c9fd): racecheck and synccheck, the 8-byte
# call at 4 ranks nine times (one_shot, auto), then every strategy side by side
# (gpu_checks.sh bench, sizes to 256 MiB) and both reduction engines.
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R/san build sanitize; echo "sanitize done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3 4 5 6 7 8 9; do
  for st in one_shot auto; do
    timeout 30 $B allreduce --ranks 4 --strategy $st -b 8 -e 8 -n 200 >> $R/8B-$st.txt 2>&1
  done
done
echo "8 B done after $((SECONDS - t0)) s"; pack
DDL_GPU_LARGEST=256M bash bench/tools/gpu_checks.sh $R/sweep build bench; echo "bench done after $((SECONDS - t0)) s"; pack
grep -h "exit" $R/*/*.log 2>/dev/null | grep -v "exit 0" | head -20
