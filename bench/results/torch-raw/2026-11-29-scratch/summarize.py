#!/usr/bin/env python3
"""Medians (min-max) of the rounds in this folder, old and new side by side: summarize.py > summary.txt"""
import glob
import statistics

cols = ["all_gather list", "all_gather_into_tensor", "gloo all_gather list", "reduce_scatter list", "reduce_scatter_tensor"]
for n in (2, 4):
    print(f"## {n} ranks: ms a call, median of the rounds (min-max), old -> new")
    data = {}
    for v in ("old", "new"):
        for f in sorted(glob.glob(f"{v}-n{n}-r*.txt")):
            for line in open(f):
                p = line.split()
                if len(p) == 6 and p[0].isdigit():
                    for c, x in zip(cols, p[1:]):
                        data.setdefault((v, int(p[0]), c), []).append(float(x))
    print("| MiB a part | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for mib in sorted({k[1] for k in data}):
        cells = []
        for c in cols:
            o, w = data[("old", mib, c)], data[("new", mib, c)]
            cells.append(f"{statistics.median(o):.1f} ({min(o):.1f}-{max(o):.1f}) -> {statistics.median(w):.1f} ({min(w):.1f}-{max(w):.1f})")
        print(f"| {mib} | " + " | ".join(cells) + " |")
    print()
