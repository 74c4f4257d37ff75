#!/usr/bin/env bash
# ddl's compile-time ring (ddl:ring) and the planner's pick (ddl:auto) beside
# the same ring written by hand (ddl-bench --baseline ring, hand:ring: one
# blocking exchange a step, a plain loop reducing) and MPI_Allreduce, in one
# run each, 3 rounds: threads at 2, 4 and 8 ranks, Open MPI at 2, 4 and 8 ranks.
#   bench/tools/hand_ring_runs.sh BUILD [OUT]      (~10 min on the 2-core VM)
# then per configuration: bench/tools/mpi_ratios.py --impl ddl:ring|ddl:auto --baseline hand:ring OUT/<cfg>-r*.txt
set -euo pipefail
build=${1:?usage: hand_ring_runs.sh BUILD [OUT]}
out=${2:-$(dirname "$0")/../results/hand-ring-raw/$(date +%F)}
mkdir -p "$out"
bench=$build/bench/ddl-bench
args=(-b 4K -e 64M -f 4 -n 10 -w 2)
m=(--oversubscribe --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184)
{ uname -a; grep -m1 "model name" /proc/cpuinfo; nproc; git -C "$(dirname "$0")" log -1 --format=%h; } > "$out/machine.txt"
for round in 1 2 3; do
  for n in 2 4 8; do
    echo "== round $round, $n ranks"
    "$bench" --ranks "$n" --strategy ring,auto --baseline ring "${args[@]}" > "$out/threads-n$n-r$round.txt"
    mpirun -n "$n" "${m[@]}" "$bench" --transport mpi --strategy ring,auto --baseline ring,mpi "${args[@]}" \
      > "$out/ompi-n$n-r$round.txt"
  done
  # reduce-scatter and all-gather at 4 ranks, both transports
  for c in reduce_scatter all_gather; do
    "$bench" --ranks 4 --collective "$c" --strategy ring,auto --baseline ring "${args[@]}" > "$out/threads-$c-n4-r$round.txt"
    mpirun -n 4 "${m[@]}" "$bench" --transport mpi --collective "$c" --strategy ring,auto --baseline ring,mpi "${args[@]}" \
      > "$out/ompi-$c-n4-r$round.txt"
  done
done
