#!/usr/bin/env bash
# Why one_shot and recursive doubling run slower in place than out of place on 2 threads here:
# the coherence probe, then the two strategies in place and out of place (and the untimed write of
# the buffer before each call), ROUNDS rounds each.
#   bench/results/shared-memory-raw/2026-12-05-in-place/run.sh [ROUNDS]   (from the repository root)
set -euo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
g++ -std=c++17 -O2 -mavx2 "$here/coherence.cpp" -o "$tmp/coherence" -pthread
g++ -std=c++17 -O3 -DNDEBUG -I include "$here/one_shot_in_place.cpp" -o "$tmp/one_shot_in_place" -pthread
for r in $(seq 1 "${1:-3}"); do
  echo "# run $r ($(date -u +%T))"
  for b in 65536 262144 1048576; do "$tmp/coherence" $b; NT=1 "$tmp/coherence" $b; done
done > "$here/coherence.txt"
for r in $(seq 1 "${1:-3}"); do
  for s in 65536 262144 1048576 4194304; do
    for strat in one_shot recursive_doubling; do
      for ip in 0 1; do "$tmp/one_shot_in_place" $s $ip $strat | head -1; done
    done
  done
done > "$here/strategies.txt"
rm -rf "$tmp"
