#!/usr/bin/env python3
"""The recorded collectives tables: MPI time / ddl time per size, median of the
repeats (min-max), Open MPI at 2, 4, 8 ranks in and out of place, MPICH at 2.

usage: collective_table.py OUTDIR   (what bench/tools/collective_sweeps.sh wrote)
"""
import glob
import statistics
import sys

from bench_table import times as parse

base = sys.argv[1]


def ratios(mpi, coll, n, col):
    runs = [parse(p) for p in sorted(glob.glob(f"{base}/{mpi}_{coll}_n{n}_run*.txt"))]
    out = {}
    for r in runs:
        ddl = next(k[1] for k in r if k[1].startswith("ddl:"))
        base_impl = next(k[1] for k in r if k[1].startswith("MPI_"))
        for (s, i), v in r.items():
            if i != ddl: continue
            m = r[(s, base_impl)]
            if v[col] is None or m[col] is None: continue
            out.setdefault(s, []).append(m[col] / v[col])
    return out
def fmt(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–"
for coll, label in [("reduce_scatter", "MPI_Reduce_scatter_block"), ("all_gather", "MPI_Allgather"), ("broadcast", "MPI_Bcast")]:
    cols = [("ompi", n, 1) for n in (2, 4, 8)] + ([("ompi", n, 0) for n in (2, 4, 8)] if coll != "broadcast" else []) + [("mpich", 2, 1)]
    data = {c: ratios(c[0], coll, c[1], c[2]) for c in cols}
    print(f"\n### {coll}: {label} time / ddl time (median of 3, min–max)\n")
    head = ["size (B, n=2)"] + [f"{'Open MPI' if m == 'ompi' else 'MPICH'} n={n} {'in place' if c else 'out of place'}" for m, n, c in cols]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    # sizes differ per n (rounded to n elements); list by position
    per = {c: sorted(d) for c, d in data.items()}
    k = max(len(v) for v in per.values())
    for i in range(k):
        size = per[cols[0]][i] if i < len(per[cols[0]]) else "?"
        cells = []
        for c in cols:
            s = per[c][i] if i < len(per[c]) else None
            cells.append(fmt(data[c][s]) if s is not None else "–")
        print(f"| {size} | " + " | ".join(cells) + " |")
