#!/usr/bin/env bash
# Re-runs the figures of bench/results/shared-memory.md: every all-reduce
# strategy over in-process ranks (threads) beside the memory-traffic floor,
# at 2, 4 and 8 ranks, 4 KiB .. 64 MiB, and 256 MiB at 4 ranks.
# usage: bench/tools/shared_memory_runs.sh [build dir] [runs] [out dir]   (default bench/results/shared-memory-raw/)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-3}
bench=$build/bench/ddl-bench
out=${3:-bench/results/shared-memory-raw}
mkdir -p "$out"
stamp() { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; }
all=ring,recursive_doubling,halving_doubling,one_shot,two_shot,two_shot_stream,auto
for run in $(seq 1 "$runs"); do
  for n in 2 4 8; do
    args=(--ranks "$n" -b 4K -e 64M -f 4 -n 10 -w 3 --strategy "$all")
    { stamp "$bench ${args[*]}"; "$bench" "${args[@]}"; } > "$out/threads-n$n-run$run.txt"
  done
  args=(--ranks 4 -b 256M -e 256M -n 3 -w 1 --strategy ring,halving_doubling,two_shot,two_shot_stream,auto)
  { stamp "$bench ${args[*]}"; "$bench" "${args[@]}"; } > "$out/threads-n4-256M-run$run.txt"
done
