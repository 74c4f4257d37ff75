#!/usr/bin/env bash
# Threads (--transport local): two_shot cached, two_shot streaming the blocks it gathers, and auto
# (which measures both), 2 ranks at 4-64 MiB and 4 ranks at 4-256 MiB, ROUNDS fresh processes each.
#   bench/results/shared-memory-raw/2026-12-04-threads-streamed/run.sh BUILD [ROUNDS]     (~4 min at 3)
set -euo pipefail
here=$(dirname "$0")
build=${1:-build/release}
rounds=${2:-3}
for r in $(seq "$rounds"); do
  "$build/bench/ddl-bench" --transport local --ranks 2 --strategy two_shot,two_shot_stream,auto -b 4M -e 64M -f 4 -n 5 -w 2 \
    > "$here/n2_run$r.txt" 2>&1
  "$build/bench/ddl-bench" --transport local --ranks 4 --strategy two_shot,two_shot_stream,auto -b 4M -e 256M -f 4 -n 5 -w 2 \
    > "$here/n4_run$r.txt" 2>&1
done
