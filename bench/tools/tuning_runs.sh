#!/usr/bin/env bash
# Re-runs the tuning figures of bench/results/shared-memory.md: auto with its
# measured choice (DDL_TUNE=16M) and with the cost model alone (DDL_TUNE=0), in
# alternating runs, beside the strategies it chooses among, at 2, 4 and 8
# in-process ranks, 4 KiB .. 16 MiB.
# usage: bench/tools/tuning_runs.sh [build dir] [runs]   (writes bench/results/shared-memory-raw/tune/)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
runs=${2:-3}
bench=$build/bench/ddl-bench
out=bench/results/shared-memory-raw/tune
mkdir -p "$out"
stamp() { echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores: $*"; }
for n in 2 4 8; do
  args=(--ranks "$n" -b 4K -e 16M -f 4 -n 200 -w 20 --strategy auto,one_shot,two_shot,recursive_doubling,halving_doubling)
  for run in $(seq 1 "$runs"); do
    { stamp "DDL_TUNE=16M $bench ${args[*]}"; DDL_TUNE=16M "$bench" "${args[@]}"; } > "$out/tuned-n$n-run$run.txt"
    { stamp "DDL_TUNE=0 $bench ${args[*]}"; DDL_TUNE=0 "$bench" "${args[@]}"; } > "$out/model-n$n-run$run.txt"
  done
done
