#!/bin/sh
# one_shot synchronised through counters in the shared stages (2026-11-25,
# issue 21): ddl `auto` (which now takes one_shot up to 64 KiB over MPI ranks
# that share stages) beside recursive doubling (what auto took there before)
# and MPI's own call, 8 B-256 KiB, 500 iterations after 50 warm-up, 3 runs
# each: tuned Open MPI 4.1.4 at 2, 4, 8 ranks, MPICH 4.0.2 at 2 and 4; then
# reduce-scatter and all-gather (their direct forms are flagged too) against
# MPI_Reduce_scatter_block and MPI_Allgather, Open MPI 2, 4, 8 and MPICH 2.
# Usage: sh run.sh BUILD BUILD_MPICH OUTDIR     (Release build trees)
# Summaries: bench/tools/mpi_ratios.py OUTDIR/ompi_n4_run*.txt (and so on);
# bench/tools/median_of_runs.py OUTDIR/ompi_n4_run*.txt [--placement ip]
B=$1 BM=$2 OUT=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
args="--transport mpi --strategy auto,recursive_doubling --baseline mpi -b 8 -e 256K -f 8 -n 500 -w 50"
mkdir -p $OUT
for rep in 1 2 3; do
  for n in 2 4 8; do
    mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T \
      $B/bench/ddl-bench $args > $OUT/ompi_n${n}_run$rep.txt 2>&1
  done
  for n in 2 4; do
    mpiexec.mpich -n $n $BM/bench/ddl-bench $args > $OUT/mpich_n${n}_run$rep.txt 2>&1
  done
done
for rep in 1 2 3; do for c in reduce_scatter all_gather; do
  for n in 2 4 8; do
    mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T \
      $B/bench/ddl-bench --transport mpi --collective $c --strategy auto --baseline mpi -b 8 -e 256K -f 8 -n 500 -w 50 \
      > $OUT/${c}_ompi_n${n}_run$rep.txt 2>&1
  done
  mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --collective $c --strategy auto --baseline mpi \
    -b 8 -e 256K -f 8 -n 500 -w 50 > $OUT/${c}_mpich_n2_run$rep.txt 2>&1
done; done
