#!/usr/bin/env python3
"""Old against new from run.sh's files: ddl's broadcast, us a call (median of the rounds, min-max),
and over MPI MPI_Bcast's time / ddl's in the same runs, per placement of the calls (batch: 50 back
to back a sample; single: one call between barriers).
usage: summarize.py [DIR]   (default: this folder) > summary.txt"""
import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "tools"))
from bench_table import median_range as fmt, times  # noqa: E402

folder = sys.argv[1] if len(sys.argv) > 1 else here



for kind, label in (("threads-", "threads"), ("", "Open MPI"), ("mpich-", "MPICH")):
    for mode in ("batch", "single"):
        for n in (2, 3, 4, 8):
            runs = {v: [times(p) for p in sorted(glob.glob(f"{folder}/{kind}{mode}-{v}-n{n}-r*.txt"))]
                    for v in ("old", "new")}
            if not runs["old"] or not runs["new"]:
                continue
            sizes = sorted({s for s, impl in runs["old"][0] if impl.startswith("ddl:")})
            print(f"\n{label}, {n} ranks, {mode}: ddl us a call, old -> new"
                  + ("" if kind == "threads-" else "; MPI_Bcast / ddl, old -> new"))
            for s in sizes:
                t = {v: [r[(s, "ddl:broadcast")][1] for r in runs[v] if (s, "ddl:broadcast") in r] for v in runs}
                line = f"{s:>8} B  {fmt(t['old'])} -> {fmt(t['new'])}"
                if kind != "threads-":
                    q = {v: [r[(s, "MPI_Bcast")][1] / r[(s, "ddl:broadcast")][1] for r in runs[v]
                             if (s, "MPI_Bcast") in r and r[(s, "ddl:broadcast")][1] > 0] for v in runs}
                    line += f"   |  {fmt(q['old'], 2)} -> {fmt(q['new'], 2)}"
                print(line)
