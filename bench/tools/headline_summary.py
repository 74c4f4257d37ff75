#!/usr/bin/env python3
"""The README's headline figures from bench/tools/headline_runs.sh's runs:
min / median / max over the runs of each ratio, as a markdown table.

usage: headline_summary.py OUT_DIR
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import times  # noqa: E402


def spread(v, digits=2, unit=""):
    if not v:
        return "-"
    return (f"{min(v):.{digits}f}{unit} / **{statistics.median(v):.{digits}f}{unit}** / "
            f"{max(v):.{digits}f}{unit} ({len(v)} runs)")


def main():
    raw = sys.argv[1]
    rows = []
    # 1. ddl auto against MPI_Allreduce, in place.
    mpi = sorted(glob.glob(os.path.join(raw, "mpi-n4-run*.txt")))
    for size in (16 << 20, 64 << 20):
        r = []
        for path in mpi:
            t = times(path)
            if (size, "ddl:auto") in t and (size, "MPI_Allreduce") in t:
                r.append(t[(size, "MPI_Allreduce")][1] / t[(size, "ddl:auto")][1])
        rows.append((f"all-reduce in place, 4 MPI ranks, {size >> 20} MiB: MPI_Allreduce time / ddl auto time",
                     spread(r, 2, "x")))
    # 2. exposed share of the all-reduce with bucketed async.
    for ratio in ("1.00", "1.50"):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "overlap-resnet50-mpi-n4-run*.txt"))):
            for line in open(path):
                f = line.split()
                if len(f) >= 7 and f[0] == ratio and f[1:3] == ["bucketed", "async"]:
                    r.append(float(f[6].rstrip("%")))
        rows.append((f"ResNet-50 backward pass, compute = {ratio}x the all-reduce, 4 MPI ranks: "
                     "all-reduce left exposed by bucketed async", spread(r, 1, "%")))
    # 3. torch all_reduce, ddl against gloo.
    for size in ("16M", "64M"):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "torch-all_reduce-n4-run*.txt"))):
            for line in open(path):
                f = line.split()
                if len(f) == 6 and f[0] == size:
                    r.append(float(f[5]))
        rows.append((f"torch.distributed all_reduce, 4 ranks under torchrun, {size}B: gloo time / ddl time",
                     spread(r, 2, "x")))
    print("| figure | min / **median** / max |")
    print("|---|---|")
    for name, v in rows:
        print(f"| {name} | {v} |")


if __name__ == "__main__":
    main()
