#!/usr/bin/env bash
# Copy steps priced at the transport's copy_step_factor (threads: 1.5, and
# direct_read_factor 2.25): every strategy and the new `auto` beside the old
# `auto` (the commit before, its own binary), alternating, 2/4/8 threads.
# usage: run.sh OLD_BENCH NEW_BENCH OUT RUNS
set -euo pipefail
old=$1 new=$2 out=$3 runs=${4:-3}
mkdir -p "$out"
stamp() { echo "# $(date -u +%FT%TZ), $(nproc) cores: $*"; }
all=ring,recursive_doubling,halving_doubling,one_shot,two_shot,auto
for run in $(seq 1 "$runs"); do
  for n in 2 4 8; do
    args=(--ranks "$n" -b 4K -e 64M -f 4 -n 10 -w 3)
    { stamp "$new ${args[*]} --strategy $all"; "$new" "${args[@]}" --strategy "$all"; } > "$out/new-n$n-run$run.txt"
    { stamp "$old ${args[*]} --strategy auto"; "$old" "${args[@]}" --strategy auto; } > "$out/old-n$n-run$run.txt"
  done
done
