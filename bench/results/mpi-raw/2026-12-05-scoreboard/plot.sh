#!/usr/bin/env bash
# The scoreboard as pictures: MPI's time / ddl's, in place, against size, one PNG per collective
# (Open MPI 2/4/8 ranks, MPICH 2; medians of the 3 runs). From the repository root:
#   bench/results/mpi-raw/2026-12-05-scoreboard/plot.sh
set -euo pipefail
d=$(dirname "$0")
for c in all_reduce reduce_scatter all_gather broadcast; do
  impl=ddl:auto xlabel="message size (bytes per rank)"
  [ "$c" = broadcast ] && impl=ddl:broadcast xlabel="message size (bytes)"
  [ "$c" = reduce_scatter ] || [ "$c" = all_gather ] && xlabel="message size (bytes, the whole vector)"
  bench/tools/plot_mpi_ratios.py --impl "$impl" --xlabel "$xlabel" "$d/scoreboard-$c.png" \
    "Open MPI, 2 ranks=$d/ompi_${c}_n2_run*.txt" "Open MPI, 4 ranks=$d/ompi_${c}_n4_run*.txt" \
    "Open MPI, 8 ranks=$d/ompi_${c}_n8_run*.txt" "MPICH, 2 ranks=$d/mpich_${c}_n2_run*.txt"
done
