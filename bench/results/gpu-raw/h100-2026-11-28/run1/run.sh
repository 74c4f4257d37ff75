#!/bin/bash
# The 2026-11-28 device run 1 (HEAD 938c9fd, never run on a GPU: the enter_flagged
# refactor 49865de, the CUB opt-in 1b1ed1b): tests, memcheck, the 8-byte call
# (one_shot and auto, three times), auto at 8 B-512 KiB and 1-256 MiB, device buffers over MPI.
set -u
R=/tmp/res; mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C $R . ; }
export DDL_GPU_PREBUILT=$PWD/.gpubin DDL_GPU_CASE_LIMIT=75
t0=$SECONDS
bash bench/tools/gpu_checks.sh $R build test; echo "tests done after $((SECONDS - t0)) s"; pack
DDL_GPU_QUICK=1 bash bench/tools/gpu_checks.sh $R/san build sanitize; echo "memcheck done after $((SECONDS - t0)) s"; pack
export LD_LIBRARY_PATH=$PWD/.gpubin
B=.gpubin/ddl-gpu-bench
for i in 1 2 3; do
  for st in one_shot auto; do
    timeout 40 $B allreduce --ranks 2,4,8 --strategy $st -b 8 -e 8 -n 200 > $R/rep$i-$st-8B.txt 2>&1
  done
done
echo "8 B done after $((SECONDS - t0)) s"; pack
timeout 60 $B allreduce --ranks 2,4,8 --strategy auto -b 8 -e 512K -f 4 -n 20 > $R/auto.txt 2>&1
timeout 90 $B allreduce --ranks 2,4,8 --strategy auto -b 1M -e 256M -f 4 -n 10 >> $R/auto.txt 2>&1
echo "auto done after $((SECONDS - t0)) s"; pack
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 60 mpirun -n 4 --oversubscribe -x LD_LIBRARY_PATH .gpubin/ddl-gpu-mpi-bench -b 64K -e 256M -f 4 -n 10 > $R/mpi-staged.txt 2>&1
echo "mpi done after $((SECONDS - t0)) s (rc $?)"; pack
grep -h "exit" $R/*.log $R/san/*.log 2>/dev/null | grep -v "exit 0" | head -20
