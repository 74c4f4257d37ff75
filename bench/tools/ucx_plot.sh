#!/usr/bin/env bash
# Plots bench/tools/ucx_runs.sh's CSVs: in-place all-reduce time per size,
# ddl auto over UCX, ddl auto over MPI and MPI_Allreduce, one picture per
# rank count (bench/results/ucx-nN.png).
#   bench/tools/ucx_plot.sh [raw dir] [out dir]
set -euo pipefail
raw=${1:-bench/results/ucx-raw}
out=${2:-bench/results}
for f in "$raw"/ucx-n*.csv; do
  n=$(basename "$f" .csv); n=${n#ucx-n}
  dat="$raw/ucx-n$n-inplace.dat"
  python3 - "$raw" "$n" > "$dat" <<'PY'
import csv, sys
raw, n = sys.argv[1], sys.argv[2]
def load(path):
    out = {}
    with open(path) as f:
        for r in csv.DictReader(l for l in f if not l.startswith("#")):
            if r["placement"] == "in-place":
                out[(int(r["size"]), r["impl"])] = float(r["time_us"])
    return out
u, m = load(f"{raw}/ucx-n{n}.csv"), load(f"{raw}/mpi-n{n}.csv")
print("# size ucx_auto_us mpi_auto_us MPI_Allreduce_us")
for s in sorted({k[0] for k in u}):
    print(s, u.get((s, "ddl:auto"), "nan"), m.get((s, "ddl:auto"), "nan"), u.get((s, "MPI_Allreduce"), "nan"))
PY
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$out/ucx-n$n.png"
set title "all-reduce in place, $n ranks on one 2-core host: ddl over UCX, ddl over MPI, MPI_Allreduce"
set logscale xy
set xlabel "bytes per rank"
set ylabel "time per call (us)"
set key top left
set grid
plot "$dat" using 1:2 with linespoints title "ddl auto over UCX", \
     "$dat" using 1:3 with linespoints title "ddl auto over MPI", \
     "$dat" using 1:4 with linespoints title "MPI_Allreduce (Open MPI)"
GP
done
