#!/bin/bash
# HEAD (7311be7, clean build) against the new code in turns: auto only, 16 and 64 MiB, 5:1.
set -eu
cd /work/main
out=$1 rounds=$2
for ((i = 1; i <= rounds; i++)); do
  for v in head new; do
    b=/tmp/cl/bench-new2; [ $v = head ] && b=/tmp/cl/bench-head
    bench/cluster/run.sh --racks 2 --hosts-per-rack 2 --ranks-per-host 2 -b 16M -e 64M -f 4 -n 3 -w 1 --strategy multi_ring,auto \
      --intra 1gbit --inter 200mbit --bench "$b" --out "$out/$v-$i" > "$out/$v-$i.log" 2>&1
  done
done
