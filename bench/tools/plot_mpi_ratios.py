#!/usr/bin/env python3
"""Plots MPI's time / ddl's time against message size, in place, one line
per configuration (the median over its repeated runs), with gnuplot.

usage: plot_mpi_ratios.py [--pairs] [--impl ddl:NAME] [--baseline ROW] [--xlabel TEXT] OUT.png "LABEL=GLOB" ["LABEL=GLOB" ...]

--pairs: consecutive configurations share a colour, the second dashed (a
change against what it replaced). --impl and --baseline as mpi_ratios.py
takes them: the ddl row (default ddl:auto) and the row it is compared with
(default the MPI call's; hand:ring for `--baseline ring` runs). --xlabel names
the sizes (default "message size (bytes per rank)"; ddl-bench's size is the
whole vector for reduce-scatter and all-gather).

Each GLOB names the ddl-bench runs of one configuration (as mpi_ratios.py
takes them); the ratio per size is taken inside each run, then the median
over the runs. Writes OUT.png, and OUT.dat / OUT.gp beside it.
"""

import glob
import statistics
import subprocess
import sys

from bench_table import take, times as parse


def ratios(files, ddl="ddl:auto", baseline=None):
    runs = [parse(p) for p in files]
    mpi = baseline or next((k[1] for r in runs for k in r if k[1].startswith("MPI_")), "MPI_Allreduce")
    out = {}
    for s in sorted({k[0] for r in runs for k in r}):
        v = [r[(s, mpi)][1] / r[(s, ddl)][1] for r in runs if (s, ddl) in r and (s, mpi) in r and r[(s, ddl)][1] > 0]
        if v:
            out[s] = statistics.median(v)
    return out, mpi


def main(argv):
    pairs = "--pairs" in argv
    argv = [a for a in argv if a != "--pairs"]
    ddl = take(argv, "--impl", "ddl:auto")
    baseline = take(argv, "--baseline")
    xlabel = take(argv, "--xlabel", "message size (bytes per rank)")
    if len(argv) < 3:
        sys.exit(__doc__)
    png = argv[1]
    stem = png[:-4] if png.endswith(".png") else png
    series = []
    for spec in argv[2:]:
        label, _, pattern = spec.partition("=")
        files = sorted(glob.glob(pattern))
        if not files:
            sys.exit(f"plot_mpi_ratios.py: no files match {pattern}")
        series.append((label, *ratios(files, ddl, baseline)))
    mpi = series[0][2]
    with open(stem + ".dat", "w") as f:
        for label, r, _ in series:
            f.write(f"# {label}\n")
            for s, v in r.items():
                f.write(f"{s} {v:.4f}\n")
            f.write("\n\n")
    def style(i):
        if not pairs:
            return f"linecolor {i + 1}"
        return f"linecolor {i // 2 + 1} dashtype {1 + i % 2} pointtype {7 if i % 2 == 0 else 6}"
    plots = ", ".join(f"'{stem}.dat' index {i} using 1:2 with linespoints {style(i)} title '{label}'"
                      for i, (label, _, _) in enumerate(series))
    with open(stem + ".gp", "w") as f:
        f.write(f"""set terminal pngcairo size 900,520 font ',11' noenhanced
set output '{png}'
set logscale x 2
set format x '%.0b%B'
set xlabel '{xlabel}'
set ylabel '{mpi} time / {ddl} time (in place)'
set grid
set key top left
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2
plot {plots}
""")
    subprocess.run(["gnuplot", stem + ".gp"], check=True)


if __name__ == "__main__":
    main(sys.argv)
