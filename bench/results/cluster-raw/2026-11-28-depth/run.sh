#!/usr/bin/env bash
# The library's pipeline depth (4) against the 16 bench/cluster/run.sh used to set, in turns, 2 rounds,
# 5:1 (1 Gbit/s in a rack, 200 Mbit/s across), 2 racks x 2 hosts x 2 ranks, auto and MPI_Allreduce.
#   run.sh BENCH   (from the repository root; writes d{4,16}-r{1,2}.txt here)
set -euo pipefail
here=$(dirname "$0")
for r in 1 2; do for d in 4 16; do
  DDL_PIPELINE_DEPTH=$d bench/cluster/run.sh --racks 2 --hosts-per-rack 2 --ranks-per-host 2 -b 16M -e 64M -f 4 \
    -n 3 -w 1 --strategy auto --intra 1gbit --inter 200mbit --bench "$1" --out /tmp/depth-$d-$r
  cp /tmp/depth-$d-$r/run-1.txt "$here/d$d-r$r.txt"
done; done
