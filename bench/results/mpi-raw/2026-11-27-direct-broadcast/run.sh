#!/bin/sh
# Broadcast through the stages (broadcast_algorithm::direct, 2026-11-27): the
# old ddl-bench (5875b36, broadcast as at 6772b2c: binomial tree, chain, scatter +
# all-gather) and the
# new one in turns, every algorithm (--strategy all) beside MPI_Bcast over
# tuned Open MPI 4.1.4 at 2, 4 and 8 ranks, and over threads (no MPI).
# Usage: sh run.sh OLD NEW OUTDIR RUNS   (ddl-bench binaries)
# Summaries: python3 bench/tools/mpi_ratios.py OUTDIR/new_mpi_n4_run*.txt (and old_);
#            python3 bench/tools/median_of_runs.py OUTDIR/new_threads_n4_run*.txt --placement ip
OLD=$1 NEW=$2 OUT=$3 RUNS=${4:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
ARGS="--collective broadcast --strategy all -b 8 -e 16M -f 8 -n 10 -w 2"
mkdir -p $OUT
for rep in $(seq 1 $RUNS); do
  for n in 2 4 8; do
    for which in old new; do
      bin=$OLD; [ $which = new ] && bin=$NEW
      mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T $bin --transport mpi --baseline mpi \
        $ARGS > $OUT/${which}_mpi_n${n}_run$rep.txt 2>&1
      $bin --ranks $n $ARGS > $OUT/${which}_threads_n${n}_run$rep.txt 2>&1
    done
  done
done
