#!/usr/bin/env bash
# Issue 21's whole scoreboard (every collective, 8 B-16 MiB, 8 B-4 KiB with 40 calls, 64 and 256 MiB;
# Open MPI 2/4/8, MPICH 2) on the code of 2026-12-04 (night): streamed stages, measured direct
# reduce-scatters, drift-following choices. The 2026-11-28 script, written here:
#   bench/results/mpi-raw/2026-12-04-scoreboard-streamed/run.sh BUILD BUILD_MPICH     (~25 min)
set -euo pipefail
here=$(dirname "$0")
exec "$here/../2026-11-28-scoreboard-xeon/run.sh" "$1" "$2" "$here"
