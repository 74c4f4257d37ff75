#!/usr/bin/env python3
"""Old against new ddl:broadcast (what `auto` ran), in place, median of the runs in this folder
(run.sh's files), and MPI_Bcast's time over each within its run (MPI rows only).
usage: python3 compare.py   (in this folder)"""
import glob
import statistics
import sys

sys.path.insert(0, "../../../tools")
from bench_table import rows  # noqa: E402


def runs(which, kind, n):
    out = []
    for path in sorted(glob.glob(f"{which}_{kind}_n{n}_run*.txt")):
        t, plan = {}, {}
        for size, impl, _, ip, line in rows(path):
            t[(size, impl)] = ip
            if impl == "ddl:broadcast":
                plan[size] = " ".join(line.split()[15:])
        out.append((t, plan))
    return out


def med(v):
    return statistics.median(v) if v else float("nan")


for kind in ("mpi", "threads"):
    for n in (2, 4, 8):
        old, new = runs("old", kind, n), runs("new", kind, n)
        sizes = sorted({s for t, _ in old for (s, impl) in t if impl == "ddl:broadcast"})
        print(f"## {kind}, {n} ranks: ddl:broadcast in place, median us (old | new), old/new"
              + (", MPI_Bcast / ddl (old | new)" if kind == "mpi" else "") + "; new plan")
        for s in sizes:
            o = med([t[(s, "ddl:broadcast")] for t, _ in old])
            w = med([t[(s, "ddl:broadcast")] for t, _ in new])
            line = f"{s:>9} {o:9.1f} | {w:9.1f}  {o / w:5.2f}x"
            if kind == "mpi":
                ro = med([t[(s, "MPI_Bcast")] / t[(s, "ddl:broadcast")] for t, _ in old])
                rw = med([t[(s, "MPI_Bcast")] / t[(s, "ddl:broadcast")] for t, _ in new])
                line += f"   {ro:4.2f} | {rw:4.2f}"
            plans = sorted({p[s] for _, p in new})
            print(line + "   " + ", ".join(plans))
