#!/usr/bin/env python3
"""MPICH, 2 ranks: MPI time / ddl time per size and collective, median of the
runs (min-max), in place and out of place, beside the earlier MPICH runs
(2026-11-23 all-reduce, 2026-11-24 the other collectives) where a size matches.

usage: python3 summarize.py [DIR]   (DIR: what run.sh wrote; default: this folder; before-copy-pieces/
holds the same runs of 0b26bf1, before host::copy)
"""
import glob
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "tools"))
from bench_table import rows  # noqa: E402

new_dir = sys.argv[1] if len(sys.argv) > 1 else here
old = {"all_reduce": os.path.join(here, "..", "2026-11-23", "mpich_n2_run*.txt")}
for c in ("reduce_scatter", "all_gather", "broadcast"):
    old[c] = os.path.join(here, "..", "2026-11-24-collectives", f"mpich_{c}_n2_run*.txt")


def ratios(pattern):
    """{size: ([in-place ratios], [out-of-place ratios], [ddl in-place us])}"""
    out = {}
    for path in sorted(glob.glob(pattern)):
        run = {}
        for size, impl, oop, ip, _ in rows(path):
            run[(size, impl)] = (oop, ip)
        for (size, impl), (oop, ip) in run.items():
            if not impl.startswith("ddl:"):
                continue
            mpi = next((v for (s, i), v in run.items() if s == size and i.startswith("MPI_")), None)
            if mpi is None:
                continue
            e = out.setdefault(size, ([], [], []))
            e[0].append(mpi[1] / ip)
            if oop is not None and mpi[0] is not None:
                e[1].append(mpi[0] / oop)
            e[2].append(ip)
    return out


def fmt(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"


for c in ("all_reduce", "reduce_scatter", "all_gather", "broadcast"):
    new = ratios(os.path.join(new_dir, f"mpich_{c}_n2_run*.txt"))
    before = ratios(old[c])
    print(f"\n{c}: MPI time / ddl time, MPICH, 2 ranks (median of {len(glob.glob(os.path.join(new_dir, f'mpich_{c}_n2_run*.txt')))})")
    print("| size (B) | ddl in place us | in place | out of place | in place, earlier MPICH runs |")
    print("|---|---|---|---|---|")
    for size in sorted(new):
        ip, oop, us = new[size]
        b = before.get(size)
        print(f"| {size} | {statistics.median(us):.1f} | {fmt(ip)} | {fmt(oop)} | {fmt(b[0]) if b else '-'} |")
