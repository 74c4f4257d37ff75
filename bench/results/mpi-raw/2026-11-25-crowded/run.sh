#!/bin/sh
# A/B of a crowded node's default costs (2026-11-25), three ddl-bench builds
# alternated, 6 runs each, tuned Open MPI 4.1.4, the 2-core VM:
#   old  = 78d9d84 (a node step priced at 2 us, 5 GB/s; broadcast on the
#          transport's default link, 20 us, 2 GB/s)
#   new1 = 633f992+faa3d69 (20 us, 5 GB/s; broadcast on the strategy's topology)
#   new2 = what landed (20 us, 5 GB/s x cores / ranks)
# Usage: sh run.sh OLD NEW1 NEW2 OUTDIR   (ddl-bench binaries)
# final/: all-reduce old, new1, new2 and broadcast old, new2; latency-only/:
# broadcast old, new1. Summaries: bench/tools/mpi_ratios.py FILES.
OLD=$1 NEW1=$2 NEW2=$3 OUT=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
run() { mpirun -n $1 --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $2 --transport mpi --strategy auto \
          --baseline mpi $3; }
mkdir -p $OUT/final $OUT/latency-only
for rep in 1 2 3 4 5 6; do for n in 4 8; do
  run $n $OLD  "-b 16K -e 1M -f 4 -n 100 -w 10" > $OUT/final/allreduce_old_n${n}_run$rep.txt 2>&1
  run $n $NEW1 "-b 16K -e 1M -f 4 -n 100 -w 10" > $OUT/final/allreduce_new1_n${n}_run$rep.txt 2>&1
  run $n $NEW2 "-b 16K -e 1M -f 4 -n 100 -w 10" > $OUT/final/allreduce_new2_n${n}_run$rep.txt 2>&1
done; done
for rep in 1 2 3 4 5 6; do for n in 4 8; do
  run $n $OLD  "--collective broadcast -b 32K -e 16M -f 8 -n 20 -w 2" > $OUT/final/broadcast_old_n${n}_run$rep.txt 2>&1
  run $n $NEW2 "--collective broadcast -b 32K -e 16M -f 8 -n 20 -w 2" > $OUT/final/broadcast_new2_n${n}_run$rep.txt 2>&1
done; done
for rep in 1 2 3 4 5 6; do for n in 4 8; do
  run $n $OLD  "--collective broadcast -b 32K -e 16M -f 8 -n 20 -w 2" > $OUT/latency-only/broadcast_old_n${n}_run$rep.txt 2>&1
  run $n $NEW1 "--collective broadcast -b 32K -e 16M -f 8 -n 20 -w 2" > $OUT/latency-only/broadcast_new1_n${n}_run$rep.txt 2>&1
done; done
