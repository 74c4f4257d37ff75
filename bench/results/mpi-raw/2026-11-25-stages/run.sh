#!/bin/sh
# The direct strategies over MPI through shared stages (2026-11-25, issue 21):
# ddl `auto` beside MPI's own call, with stages (the default) and without
# (DDL_MPI_SHM=0, what auto ran before) alternating, 3 runs each, tuned Open
# MPI 4.1.4 at 2, 4, 8 ranks and MPICH 4.0.2 at 2 (at 4 and 8 its ch4:ucx
# busy-polls on this 2-core VM: see the 2026-11-23 section); then
# reduce-scatter and all-gather with stages, 3 runs each.
# Usage: sh run.sh BUILD BUILD_MPICH OUTDIR     (Release build trees)
# Summaries: bench/tools/mpi_ratios.py OUTDIR/allreduce_shm_n4_run*.txt (and so on).
B=$1 BM=$2 OUT=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this VM runs as root
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
ompi() { n=$1; shm=$2; shift 2
  DDL_MPI_SHM=$shm mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T -x DDL_MPI_SHM \
    $B/bench/ddl-bench --transport mpi --strategy auto --baseline mpi "$@"; }
mkdir -p $OUT
for rep in 1 2 3; do
  for n in 2 4 8; do
    ompi $n 1 -b 8 -e 256M -f 8 -n 5 -w 2 > $OUT/allreduce_shm_n${n}_run$rep.txt 2>&1
    ompi $n 0 -b 8 -e 256M -f 8 -n 5 -w 2 > $OUT/allreduce_noshm_n${n}_run$rep.txt 2>&1
  done
  DDL_MPI_SHM=1 mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --strategy auto --baseline mpi \
    -b 8 -e 256M -f 8 -n 5 -w 2 > $OUT/mpich_allreduce_shm_n2_run$rep.txt 2>&1
  DDL_MPI_SHM=0 mpiexec.mpich -n 2 $BM/bench/ddl-bench --transport mpi --strategy auto --baseline mpi \
    -b 8 -e 256M -f 8 -n 5 -w 2 > $OUT/mpich_allreduce_noshm_n2_run$rep.txt 2>&1
done
for rep in 1 2 3; do for c in reduce_scatter all_gather; do for n in 2 4 8; do
  ompi $n 1 --collective $c -b 8 -e 64M -f 8 -n 5 -w 2 > $OUT/${c}_shm_n${n}_run$rep.txt 2>&1
done; done; done
