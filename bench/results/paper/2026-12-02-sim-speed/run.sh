#!/usr/bin/env bash
# The simulator's own speed, old binary against new, in turns on one machine:
#   run.sh OLD_DDL_SIM NEW_DDL_SIM [OUT_DIR]      (~15 min)
# Two workloads, 2 rounds: the paper's 256 GPUs, every strategy (350 MB),
# and every multi-ring of the paper network grown to 1024 ranks; then the
# new binary alone on 4096 ranks (the old one takes several times its 1024
# ranks' 3 minutes). /usr/bin/time -v gives wall time and peak memory; the
# simulated times are compared row by row (summary.txt).
set -euo pipefail
old=$1 new=$2 out=${3:-$(dirname "$0")}
mkdir -p "$out"
paper=(--preset paper --strategy all)
r1024=(--topology 4:20GB/s:3us,16:10GB/s:5us,16:9.5GB/s:8us --bytes 350e6 --strategy multi_ring)
r4096=(--topology 4:20GB/s:3us,16:10GB/s:5us,64:9.5GB/s:8us --bytes 350e6 --strategy multi_ring)
run() {  # name which round args...
  local name=$1 which=$2 round=$3 bin; shift 3
  bin=$old; [ "$which" = new ] && bin=$new
  /usr/bin/time -v -o "$out/$name-$which-$round.time" "$bin" "$@" > "$out/$name-$which-$round.txt"
}
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then
  for round in 1 2; do
    for which in old new; do
      run paper $which $round "${paper[@]}"
      run scale-1024 $which $round "${r1024[@]}"
    done
  done
  run scale-4096 new 1 "${r4096[@]}"
fi
{
  echo "# wall (m:ss) and peak RSS per run; simulated rows compared without the wall_s column"
  for f in "$out"/*.time; do
    b=$(basename "$f" .time)
    w=$(awk -F': ' '/Elapsed/{print $2}' "$f")
    m=$(awk -F': ' '/Maximum resident/{printf "%.0f", $2/1024}' "$f")
    echo "$b wall $w rss ${m} MiB"
  done
  for name in paper scale-1024; do
    if diff <(sed -E 's/ +[0-9.]+$//; /peak memory/d' "$out/$name-old-1.txt") \
            <(sed -E 's/ +[0-9.]+$//; /peak memory/d' "$out/$name-new-1.txt") > "$out/$name.diff"; then
      echo "$name: simulated rows identical"
    else
      echo "$name: rows that differ (old <, new >):"; grep '^[<>]' "$out/$name.diff"
    fi
  done
} > "$out/summary.txt"
cat "$out/summary.txt"
