#!/bin/sh
# two_shot and the direct all-gather through the stages in 1 MiB segments
# (2026-11-26, issue 21): ddl `auto` beside MPI_Allreduce and MPI_Allgather
# on plain buffers, the commit before (OLD build) and this one (NEW build)
# alternating, 3 runs each, Open MPI 4.1.4 at 2, 4, 8 ranks; MPICH 4.0.2 at
# 2 ranks (this commit only).
# Usage: sh run.sh OLD_BUILD NEW_BUILD NEW_MPICH_BUILD OUTDIR   (Release build trees)
# Summaries: bench/tools/mpi_ratios.py OUTDIR/new_n2_run*.txt (and so on).
OLD=$1 NEW=$2 BM=$3 OUT=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
ompi() { n=$1 b=$2; shift 2
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T \
    $b/bench/ddl-bench --transport mpi --strategy auto --baseline mpi "$@"; }
mkdir -p $OUT
for rep in 1 2 3; do
  for n in 2 4 8; do
    ompi $n $OLD -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/old_n${n}_run$rep.txt 2>&1
    ompi $n $NEW -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/new_n${n}_run$rep.txt 2>&1
    ompi $n $OLD --collective all_gather -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/ag_old_n${n}_run$rep.txt 2>&1
    ompi $n $NEW --collective all_gather -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/ag_new_n${n}_run$rep.txt 2>&1
  done
  mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --strategy auto --baseline mpi \
    -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/mpich_new_n2_run$rep.txt 2>&1
  mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --strategy auto --baseline mpi --collective all_gather \
    -b 256K -e 128M -f 8 -n 5 -w 2 > $OUT/mpich_ag_new_n2_run$rep.txt 2>&1
done
