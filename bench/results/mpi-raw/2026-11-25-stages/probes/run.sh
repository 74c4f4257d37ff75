#!/bin/sh
# Standalone probes behind the stages' design (2026-11-25): how fast one
# process reads another's memory with process_vm_readv against memcpy, and
# a two-shot all-reduce through cross-memory reads or through memfd stages,
# each beside MPI_Allreduce (in place) in the same run. Not ddl's code.
# Usage: sh run.sh OUTDIR   (from this folder's parent's parent: any cwd)
D=$(dirname "$0"); OUT=${1:-$D}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
g++ -O2 -o /tmp/cma_vs_memcpy $D/cma_vs_memcpy.cpp && /tmp/cma_vs_memcpy > $OUT/cma_vs_memcpy.txt
mpicxx -O3 -march=native -o /tmp/cma_two_shot $D/cma_two_shot.cpp
mpicxx -O3 -march=native -o /tmp/stage_two_shot $D/stage_two_shot.cpp
for n in 2 4 8; do for s in 1 16 64; do
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T /tmp/cma_two_shot $((s << 20)) 262144
  mpirun -n $n --oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=$T /tmp/stage_two_shot $((s << 20))
done; done > $OUT/two_shot_probes.txt 2>&1
