#!/bin/sh
# ddl::shared_buffer (2026-11-26, issue 21): ddl `auto` beside MPI's own call,
# every implementation on plain buffers (as before) and on shared buffers
# (`--shared-buffers`: the same ddl::shared_buffer memory for ddl,
# MPI_Allreduce and the copy floor; ddl's peers then read it in place)
# alternating, 3 runs each, Open MPI 4.1.4 at 2, 4, 8 ranks and MPICH 4.0.2
# at 2; then reduce-scatter and all-gather on shared buffers at 2, 4, 8 ranks.
# Usage: sh run.sh BUILD BUILD_MPICH OUTDIR     (Release build trees)
# Summaries: bench/tools/mpi_ratios.py OUTDIR/allreduce_shared_n2_run*.txt (and so on).
B=$1 BM=$2 OUT=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
ompi() { n=$1; shift
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T \
    $B/bench/ddl-bench --transport mpi --strategy auto --baseline mpi "$@"; }
mkdir -p $OUT
for rep in 1 2 3; do
  for n in 2 4 8; do
    ompi $n -b 8 -e 128M -f 8 -n 5 -w 2 > $OUT/allreduce_plain_n${n}_run$rep.txt 2>&1
    ompi $n -b 8 -e 128M -f 8 -n 5 -w 2 --shared-buffers > $OUT/allreduce_shared_n${n}_run$rep.txt 2>&1
  done
  for sb in plain shared; do
    flag=; [ $sb = shared ] && flag=--shared-buffers
    mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --strategy auto --baseline mpi \
      -b 8 -e 128M -f 8 -n 5 -w 2 $flag > $OUT/mpich_allreduce_${sb}_n2_run$rep.txt 2>&1
  done
done
for rep in 1 2 3; do for c in reduce_scatter all_gather; do for n in 2 4 8; do
  ompi $n --collective $c -b 4K -e 64M -f 8 -n 5 -w 2 --shared-buffers > $OUT/${c}_shared_n${n}_run$rep.txt 2>&1
done; done; done
