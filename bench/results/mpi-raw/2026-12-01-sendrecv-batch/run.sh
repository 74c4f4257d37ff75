#!/usr/bin/env bash
# Point-to-point back to back: ddl-bench --collective sendrecv --batch 50 (50
# ring shifts a timed sample, no barrier between them: what a pipeline's
# stream of small hand-offs sees) beside MPI_Sendrecv, the commit before the
# two changes to the progress engine's parked transfers (OLD: 666374d) and
# after (NEW), in turns, 3 rounds: Open MPI at 2, 4 and 8 ranks, MPICH at 2,
# 8 B to 64 KiB; then mpi_ratios.py -> summary.txt. Then threads (no MPI
# baseline there): ddl's time a call, 2 and 4 in-process ranks -> threads.txt.
#   run.sh OLD NEW [OLD_MPICH NEW_MPICH]   (build folders holding bench/ddl-bench; writes here,
#   or to $DDL_RESULTS_DIR when set)
set -euo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
old_mpich=${3:+$(realpath "$3")}
new_mpich=${4:+$(realpath "$4")}
here=${DDL_RESULTS_DIR:-$(cd "$(dirname "$0")" && pwd)}
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
args=(--transport mpi --baseline mpi --collective sendrecv -b 8 -e 64K -f 8 -n 20 -w 3 --batch 50)
{ lscpu | grep 'Model name'; nproc; git -C "$here" rev-parse --short HEAD; } > machine.txt
for r in 1 2 3; do
  for which in old new; do
    build=$old; [ $which = new ] && build=$new
    for n in 2 4 8; do
      timeout 300 mpirun -n $n "${m[@]}" "$build/bench/ddl-bench" "${args[@]}" > ompi-$which-n$n-r$r.txt 2>&1
    done
    mpich=$old_mpich; [ $which = new ] && mpich=$new_mpich
    if [ -n "$mpich" ]; then
      timeout 300 mpiexec.mpich -n 2 "$mpich/bench/ddl-bench" "${args[@]}" > mpich-$which-n2-r$r.txt 2>&1
    fi
  done
done
tools=$here/../../../tools
{
  for which in old new; do
    for n in 2 4 8; do
      echo "## sendrecv --batch 50, Open MPI, $n ranks, $which"
      python3 "$tools/mpi_ratios.py" --impl ddl:sendrecv ompi-$which-n$n-r*.txt
      echo
    done
    if [ -n "$new_mpich" ]; then
      echo "## sendrecv --batch 50, MPICH, 2 ranks, $which"
      python3 "$tools/mpi_ratios.py" --impl ddl:sendrecv mpich-$which-n2-r*.txt
      echo
    fi
  done
} > summary.txt
cat summary.txt
for r in 1 2 3; do
  for which in old new; do
    build=$old; [ $which = new ] && build=$new
    for n in 2 4; do
      timeout 300 "$build/bench/ddl-bench" --ranks $n --collective sendrecv -b 8 -e 64K -f 8 -n 20 -w 3 --batch 50 \
        > threads-$which-n$n-r$r.txt 2>&1
    done
  done
done
{
  echo "# ddl:sendrecv us a call (median of 20 batches of 50), threads; one column a round"
  for which in old new; do
    for n in 2 4; do
      echo "## $which, $n ranks"
      paste threads-$which-n$n-r1.txt threads-$which-n$n-r2.txt threads-$which-n$n-r3.txt |
        awk '$5 == "ddl:sendrecv" { printf "%10s B: %8s %8s %8s us\n", $1, $6, $21, $36 }'
    done
  done
} > threads.txt
cat threads.txt
