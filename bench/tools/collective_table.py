#!/usr/bin/env python3
"""The recorded collectives tables: MPI time / ddl time per size, median of the
repeats (min-max), Open MPI and MPICH at 2, 4, 8 ranks (those OUTDIR holds runs of) in and out of place;
each table for a collective OUTDIR holds runs of, then the cells whose median
is below 1.0 (ddl behind).

usage: collective_table.py OUTDIR   (what bench/tools/collective_sweeps.sh wrote)
"""
import glob
import statistics
import sys

from bench_table import provenance, times as parse

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
for coll, label in [("all_reduce", "MPI_Allreduce"), ("reduce_scatter", "MPI_Reduce_scatter_block"),
                    ("all_gather", "MPI_Allgather"), ("broadcast", "MPI_Bcast")]:
    if not glob.glob(f"{base}/*_{coll}_n*_run*.txt"): continue
    places = (1, 0) if coll != "broadcast" else (1,)
    cols = [(m, n, c) for m in ("ompi", "mpich") for c in places for n in (2, 4, 8)
            if glob.glob(f"{base}/{m}_{coll}_n{n}_run*.txt")]
    data = {c: ratios(c[0], coll, c[1], c[2]) for c in cols}
    runs = len(glob.glob(f"{base}/{cols[0][0]}_{coll}_n{cols[0][1]}_run*.txt"))
    print(f"\n### {coll}: {label} time / ddl time (median of {runs}, min–max)\n")
    print(provenance(sorted(glob.glob(f"{base}/*_{coll}_n*_run*.txt")), "bench/tools/collective_table.py " + base) + "\n")
    head = [f"size (B, n={cols[0][1]})"] + [f"{'Open MPI' if m == 'ompi' else 'MPICH'} n={n} {'in place' if c else 'out of place'}" for m, n, c in cols]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    # sizes differ per n (rounded to n elements); list by position
    per = {c: sorted(d) for c, d in data.items()}
    k = max(len(v) for v in per.values())
    behind = []
    for i in range(k):
        size = per[cols[0]][i] if i < len(per[cols[0]]) else "?"
        cells = []
        for c, h in zip(cols, head[1:]):
            s = per[c][i] if i < len(per[c]) else None
            cells.append(fmt(data[c][s]) if s is not None else "–")
            if s is not None and data[c][s] and statistics.median(data[c][s]) < 1.0:
                behind.append(f"{h} at {size} B ({statistics.median(data[c][s]):.3f})")
        print(f"| {size} | " + " | ".join(cells) + " |")
    print(f"\nBehind (median < 1.0): {'; '.join(behind) if behind else 'none'}")
