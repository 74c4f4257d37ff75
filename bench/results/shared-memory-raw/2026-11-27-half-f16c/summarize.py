#!/usr/bin/env python3
"""Median over runs of ddl:auto's times, old / new, from run.sh's files (run in this folder).
usage: summarize.py [WHAT_OLD_IS] (default: this folder's builds); dtypes without files are skipped."""
import glob
import statistics
import sys


def read(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) > 11 and f[4] == "ddl:auto":
            rows[int(f[0])] = (float(f[5]), float(f[10]))
    return rows


old_is = sys.argv[1] if len(sys.argv) > 1 else "f8c26cc: library and bench as at 3d2a415"
print(f"# median of the runs, ddl:auto time in us, old ({old_is}) and new; out of place | in place")
print("# ranks dtype size: old new old/new | old new old/new")
for n in (2, 4):
    for d in ("half", "bfloat16", "float"):
        runs = {w: [read(p) for p in sorted(glob.glob(f"{w}-n{n}-{d}-run*.txt"))] for w in ("old", "new")}
        if not runs["old"] or not runs["new"]:
            continue
        for s in sorted(runs["old"][0]):
            o = [statistics.median(r[s][k] for r in runs["old"]) for k in (0, 1)]
            w = [statistics.median(r[s][k] for r in runs["new"]) for k in (0, 1)]
            print(f"{n} {d:8s} {s:>9d}: {o[0]:9.1f} {w[0]:9.1f} {o[0] / w[0]:5.2f}x |"
                  f" {o[1]:9.1f} {w[1]:9.1f} {o[1] / w[1]:5.2f}x")
