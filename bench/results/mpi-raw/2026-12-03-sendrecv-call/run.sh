#!/usr/bin/env bash
# Point-to-point back to back, a third time: the measurement of
# ../2026-12-01-sendrecv-batch/run.sh (ddl-bench --collective sendrecv --batch 50
# beside MPI_Sendrecv, OLD and NEW in turns, 3 rounds; Open MPI 2/4/8 ranks,
# MPICH 2, threads 2/4), across ddl's own `sendrecv` call: OLD (3e9afa5)
# shifts with recv_async, send, wait; NEW (67ea01f) with one sendrecv. Writes here.
#   run.sh OLD NEW [OLD_MPICH NEW_MPICH]   (build folders holding bench/ddl-bench)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DDL_RESULTS_DIR=$here exec "$here/../2026-12-01-sendrecv-batch/run.sh" "$@"
