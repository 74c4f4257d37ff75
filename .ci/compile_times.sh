#!/usr/bin/env bash
# How long the test build's compiles take, and how well a generator packs them on this machine's cores.
#
#   .ci/compile_times.sh record [BUILD_DIR [--target T...]]
#                                                configure and build BUILD_DIR (default build/times, the
#                                                quick start's options; everything, or the targets named)
#                                                with every compile timed; writes
#                                                BUILD_DIR/compile_times.txt ("seconds object")
#   .ci/compile_times.sh replay TIMES [GENERATOR] [SCALE]
#                                                the same CMake tree built with every compile replaced by a
#                                                sleep of its recorded time / SCALE (default 25) and every link
#                                                by a short one: prints the build's wall time scaled back and
#                                                the compiles that ended last. GENERATOR: Ninja (default) or
#                                                "Unix Makefiles". Minutes, not the build's half hour.
# Used to compare Make and Ninja on the test build: bench/results/ci-build.md.
set -euo pipefail
# An object's name in both generators (Make compiles in the target's directory, Ninja at the top).
key() { echo "${1##*CMakeFiles/}"; }

case "${1:-}" in
  --time)  # launcher: --time LOG <compiler and its arguments>
    log=$2; shift 2
    start=$(date +%s.%N); rc=0; "$@" || rc=$?; end=$(date +%s.%N)
    out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
    echo "$(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.2f", e - s}') $(key "$out")" >> "$log"
    exit $rc ;;
  --sleep)  # fake compiler: --sleep TIMES SCALE LOG <compiler and its arguments>
    times=$2; scale=$3; log=$4; shift 4
    out=""; dep=""; prev=""
    for a in "$@"; do [ "$prev" = "-o" ] && out=$a; [ "$prev" = "-MF" ] && dep=$a; prev=$a; done
    t=$(awk -v o="$(key "$out")" '$2 == o {t = $1} END {print t + 0}' "$times")
    [ "$t" = 0 ] && t=3  # not recorded (a new file): 3 s
    sleep "$(awk -v t="$t" -v s="$scale" 'BEGIN{print t / s}')"
    echo "$(date +%s.%N) $t $(key "$out")" >> "$log"
    mkdir -p "$(dirname "$out")"
    # An executable built from this one object still links: give it a main.
    case "$out" in *headers/*) : > "$out" ;; *) echo 'int main(){return 0;}' | cc -x c -c - -o "$out" ;; esac
    [ -n "$dep" ] && printf '%s:\n' "$out" > "$dep"
    exit 0 ;;
  --link)  # fake linker: writes the output
    shift; out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
    mkdir -p "$(dirname "$out")"; : > "$out"; chmod +x "$out"; exit 0 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
self="$here/$(basename "$0")"
case "${1:-}" in
  record)
    build=$(realpath -m "${2:-build/times}"); shift $(($# < 2 ? $# : 2))
    gen=(); [ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)  # as the quick start configures
    mkdir -p "$build"; : > "$build/compile_times.raw"
    cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDDL_WARNINGS_AS_ERRORS=ON \
      "-DCMAKE_CXX_COMPILER_LAUNCHER=$self;--time;$build/compile_times.raw" \
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=$self;--time;$build/compile_times.raw" >/dev/null
    cmake --build "$build" -j "$(nproc)" "$@"
    sort -k2 "$build/compile_times.raw" > "$build/compile_times.txt"
    awk '{s += $1} END {printf "%d compiles, %.0f s in all\n", NR, s}' "$build/compile_times.txt" ;;
  replay)
    times=$(realpath "${2:?replay needs the times file}"); gen=${3:-Ninja}; scale=${4:-25}
    scratch=$(mktemp -d); log="$scratch/ends.txt"; : > "$log"
    cmake -S "$src" -B "$scratch/b" -G "$gen" -DCMAKE_BUILD_TYPE=Release -DDDL_WARNINGS_AS_ERRORS=ON \
      "-DCMAKE_CXX_COMPILER_LAUNCHER=$self;--sleep;$times;$scale;$log" \
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=$self;--sleep;$times;$scale;$log" \
      "-DCMAKE_CXX_LINKER_LAUNCHER=$self;--link" >/dev/null
    start=$(date +%s.%N)
    (cd "$scratch/b" && cmake --build . -j "$(nproc)" >/dev/null)
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v k="$scale" -v g="$gen" -v n="$(nproc)" '{c += $2} END {
      printf "%s: %.0f s of compiles, built in %.0f s (scaled back; %.0f s on %d cores at best)\n",
             g, c, (e - s) * k, c / n, n }' "$log"
    echo "the last to end (seconds from the start, compile time, object):"
    sort -n "$log" | tail -4 | awk -v s="$start" -v k="$scale" '{printf "  %6.0f %6.1f %s\n", ($1 - s) * k, $2, $3}'
    rm -rf "$scratch" ;;
  *) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 2 ;;
esac
