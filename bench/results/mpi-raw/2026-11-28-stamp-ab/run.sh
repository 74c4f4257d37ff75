#!/usr/bin/env bash
# auto all-reduces (untuned path) with the plan in the call stamp (base: 55ef6a1) and without it
# (nostamp: 55ef6a1 with auto.hpp's `run(model, detail::with_plan_stamp(c, model))` made `run(model, c)`),
# in turns, 3 rounds, Open MPI 2/4/8 ranks, 8 B-32 KiB. Summary: bench/tools/median_of_runs.py
#   ar-nostamp-nN-*.txt --placement ip --old ar-base-nN-*.txt, and the in-run MPI ratios (mpi_ratios.py).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
for r in 1 2 3; do for n in 2 4 8; do for b in base nostamp; do
  mpirun -n $n "${m[@]}" /tmp/ddl-bench-$b --transport mpi --strategy auto --baseline mpi -b 8 -e 64K -f 8 -n 40 -w 10 > ar-$b-n$n-$r.txt 2>&1
done; done; done
