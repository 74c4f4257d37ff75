#!/usr/bin/env python3
"""Old against new from run.sh's files: ddl's time a call in place, us (median of the rounds,
min-max), and over MPI the MPI call's time / ddl's in the same runs (in place).
usage: summarize.py [DIR]   (default: this folder) > summary.txt"""
import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "tools"))
from bench_table import median_range as fmt, times  # noqa: E402

folder = sys.argv[1] if len(sys.argv) > 1 else here



for coll, ddl, mpi in (("broadcast", "ddl:broadcast", "MPI_Bcast"), ("all_reduce", "ddl:auto", "MPI_Allreduce")):
    for kind, label, counts in (("ompi", "Open MPI", (2, 4, 8)), ("mpich", "MPICH", (2,)), ("threads", "threads", (2, 4))):
        for n in counts:
            runs = {v: [times(p) for p in sorted(glob.glob(f"{folder}/{kind}-{coll}-n{n}-{v}-r*.txt"))]
                    for v in ("old", "new")}
            if not runs["old"] or not runs["new"]:
                continue
            sizes = sorted({s for s, impl in runs["old"][0] if impl == ddl})
            print(f"\n{coll}, {label}, {n} ranks, in place: ddl us a call, old -> new"
                  + ("" if kind == "threads" else f"; {mpi} / ddl, old -> new"))
            for s in sizes:
                t = {v: [r[(s, ddl)][1] for r in runs[v] if (s, ddl) in r] for v in runs}
                line = f"{s:>8} B  {fmt(t['old'])} -> {fmt(t['new'])}"
                if kind != "threads":
                    q = {v: [r[(s, mpi)][1] / r[(s, ddl)][1] for r in runs[v]
                             if (s, mpi) in r and (s, ddl) in r and r[(s, ddl)][1] > 0] for v in runs}
                    line += f"   |  {fmt(q['old'], 2)} -> {fmt(q['new'], 2)}"
                print(line)
