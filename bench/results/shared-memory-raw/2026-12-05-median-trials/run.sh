#!/usr/bin/env bash
# A trial's figure: the least of its 3 calls (MIN_BUILD, as before 2026-12-05) against their median
# (MED_BUILD), in turns, ROUNDS rounds, 2 threads: ring, two_shot, two_shot_stream and auto, 256 KiB-16 MiB.
# Both builds had the 2-rank measured algorithms (auto.hpp's pair_candidates) before the
# halving-doubling/ring dedupe. From the repository root:
#   bench/results/shared-memory-raw/2026-12-05-median-trials/run.sh MIN_BUILD MED_BUILD [ROUNDS]   (~1 min at 4)
set -euo pipefail
here=$(dirname "$0")
. bench/tools/in_turns.sh
step() {
  "$2/bench/ddl-bench" --transport local --ranks 2 --strategy ring,two_shot,two_shot_stream,auto -b 256K -e 16M -f 4 \
    -n 7 -w 2 > "$here/t_$1_$3.txt" 2>&1
}
in_turns "${3:-4}" "$1" "$2" step min med
