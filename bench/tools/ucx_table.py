#!/usr/bin/env python3
"""Tables of bench/tools/ucx_runs.sh's CSVs: per rank count and size, ddl auto
over UCX and over MPI and MPI_Allreduce (same job as UCX), in place first.
Usage: ucx_table.py <dir with ucx-nN.csv and mpi-nN.csv>"""
import csv
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import provenance  # noqa: E402


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r.get("impl") in (None, "floor:copy"):
                continue
            rows[(int(r["size"]), r["impl"], r["placement"])] = (float(r["time_us"]), r["wrong"], r["note"])
    return rows


def size_text(b):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b // scale} {unit}"
    return f"{b} B"


def main(d):
    ns = sorted(int(re.search(r"n(\d+)", p).group(1)) for p in glob.glob(os.path.join(d, "ucx-n*.csv")))
    for n in ns:
        u, m = load(os.path.join(d, f"ucx-n{n}.csv")), load(os.path.join(d, f"mpi-n{n}.csv"))
        print(f"\n### {n} ranks\n")
        files = [os.path.join(d, f"ucx-n{n}.csv"), os.path.join(d, f"mpi-n{n}.csv")]
        print(provenance(files, f"bench/tools/ucx_table.py {d}") + "\n")
        print("| size | UCX auto (us) | MPI auto (us) | UCX / MPI time | MPI_Allreduce (us) | MPI_Allreduce / UCX | UCX plan | wrong |")
        print("|---|---|---|---|---|---|---|---|")
        for place in ("in-place", "out-of-place"):
            for size in sorted({k[0] for k in u}):
                a, b, c = u.get((size, "ddl:auto", place)), m.get((size, "ddl:auto", place)), u.get((size, "MPI_Allreduce", place))
                if not a or not b:
                    continue
                wrong = sum(int(x[1] or 0) for x in (a, b, c) if x)
                base = f"{c[0]:.1f} | {c[0] / a[0]:.2f}x" if c else "- | -"
                print(f"| {size_text(size)} {place} | {a[0]:.1f} | {b[0]:.1f} | {a[0] / b[0]:.2f} | {base} | {a[2]} | {wrong} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/ucx-raw")
