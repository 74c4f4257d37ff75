#!/usr/bin/env python3
"""Old against new (host::copy in pieces): per configuration and size, ddl's
in-place time (median of the runs, us), the ratio old / new, and the MPI
call's time / ddl's time for each binary (the MPI rows of the same runs).

usage: python3 compare.py [DIR]
"""
import glob
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "tools"))
from bench_table import rows  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else here
configs = sorted({re.sub(r"^(old|new)_|_run\d+\.txt$", "", os.path.basename(p)) for p in glob.glob(f"{d}/*_run*.txt")})
for cfg in configs:
    per = {}
    for which in ("old", "new"):
        for path in sorted(glob.glob(f"{d}/{which}_{cfg}_run*.txt")):
            for size, impl, oop, ip, line in rows(path):
                key = "ddl" if impl.startswith("ddl:") else ("mpi" if impl.startswith("MPI_") else None)
                if key:
                    per.setdefault((which, size, key), []).append(ip)
    sizes = sorted({s for (_, s, _) in per})
    print(f"\n{cfg}: ddl in place us, median of runs")
    print("| size (B) | old | new | old / new | MPI / ddl old | MPI / ddl new |")
    print("|---|---|---|---|---|---|")
    for s in sizes:
        o, n = per.get(("old", s, "ddl")), per.get(("new", s, "ddl"))
        if not o or not n:
            continue
        mo, mn = statistics.median(o), statistics.median(n)
        mpo, mpn = per.get(("old", s, "mpi")), per.get(("new", s, "mpi"))
        r_old = f"{statistics.median(mpo) / mo:.2f}" if mpo else "-"
        r_new = f"{statistics.median(mpn) / mn:.2f}" if mpn else "-"
        print(f"| {s} | {mo:.1f} | {mn:.1f} | {mo / mn:.2f} | {r_old} | {r_new} |")
