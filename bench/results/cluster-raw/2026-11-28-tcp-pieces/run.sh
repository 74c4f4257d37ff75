#!/bin/bash
# Old and new ddl-bench in turns on the emulated two-rack network (5:1), then new alone on the uniform one.
# usage: run.sh OLD_BENCH NEW_BENCH OUT ROUNDS
set -eu
old=$1 new=$2 out=$3 rounds=$4
common="--racks 2 --hosts-per-rack 2 --ranks-per-host 2 -b 1M -e 64M -f 4 -n 3 -w 1 --strategy ring,multi_ring,pipelined,auto"
for ((i = 1; i <= rounds; i++)); do
  for v in new old; do
    b=$new; [ $v = old ] && b=$old
    bench/cluster/run.sh $common --intra 1gbit --inter 200mbit --bench "$b" --out "$out/5to1-$v-$i" > "$out/5to1-$v-$i.log" 2>&1
  done
done
for ((i = 1; i <= rounds; i++)); do
  bench/cluster/run.sh $common --intra 1gbit --inter 1gbit --bench "$new" --out "$out/uniform-new-$i" > "$out/uniform-new-$i.log" 2>&1
done
