#!/usr/bin/env python3
"""Medians over repeated ddl-async-bench runs, as markdown tables.

usage: async_summary.py bench/results/async-raw
Overlap: per (transport, ranks, compute ratio, row) the median iteration
and exposed time over runs, and exposed / blocking all-reduce time.
Overhead and broadcast: per size, the median of each column over runs.
"""
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import provenance  # noqa: E402


def overlap_tables(raw):
    groups, files = {}, {}
    for path in sorted(glob.glob(os.path.join(raw, "overlap-*-run*.txt"))):
        key = re.sub(r"-run\d+\.txt$", "", os.path.basename(path))
        files.setdefault(key, []).append(path)
        alone = None
        for line in open(path):
            m = re.match(r"# fused blocking all-reduce alone: ([\d.]+) ms", line)
            if m:
                alone = float(m.group(1))
            m = re.match(r"\s+([\d.]+)\s+(compute only|per-tensor blocking|fused blocking|bucketed async)\s+"
                         r"([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
            if m:
                ratio, row, it, comp, exp = m.group(1), m.group(2), *map(float, m.group(3, 4, 5))
                g = groups.setdefault(key, {})
                g.setdefault((ratio, row), []).append((it, exp, exp / alone if alone else 0.0))
                g.setdefault(("alone", ""), []).append((alone, 0, 0))
    for key, g in groups.items():
        alone = statistics.median(v[0] for v in g[("alone", "")])
        runs = len(g[("alone", "")]) // 12 or 1
        print(f"\n**{key}** ({runs} run(s); fused blocking all-reduce alone: median {alone:.1f} ms)\n")
        print(provenance(files[key], "bench/tools/async_summary.py " + raw) + "\n")
        print("| compute / all-reduce | row | iteration (ms) | exposed (ms) | exposed / all-reduce |")
        print("|---|---|---|---|---|")
        for (ratio, row), vals in g.items():
            if ratio == "alone":
                continue
            it = statistics.median(v[0] for v in vals)
            exp = statistics.median(v[1] for v in vals)
            frac = statistics.median(v[2] for v in vals)
            print(f"| {ratio} | {row} | {it:.1f} | {exp:.1f} | {100 * frac:.1f}% |")


def size_tables(raw, pattern, header):
    groups, files = {}, {}
    for path in sorted(glob.glob(os.path.join(raw, pattern))):
        key = re.sub(r"-run\d+\.txt$", "", os.path.basename(path))
        files.setdefault(key, []).append(path)
        for line in open(path):
            f = line.split()
            if len(f) >= 6 and not line.startswith("#") and f[0] != "size":
                groups.setdefault(key, {}).setdefault(f[0], []).append([float(x) for x in f[1:]])
    for key, g in groups.items():
        print(f"\n**{key}** ({len(next(iter(g.values())))} run(s), medians)\n")
        print(provenance(files[key], "bench/tools/async_summary.py " + raw) + "\n")
        print("| size | " + " | ".join(header) + " |")
        print("|---" * (len(header) + 1) + "|")
        for size, vals in g.items():
            cols = [statistics.median(v[i] for v in vals) for i in range(len(header))]
            print(f"| {size} | " + " | ".join(f"{c:.3g}" if abs(c) < 1000 else f"{c:.0f}" for c in cols) + " |")


def main():
    raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/async-raw"
    overlap_tables(raw)
    size_tables(raw, "overhead-*-run*.txt", ["blocking (us)", "async (us)", "diff (us)", "async / blocking", "wrong"])
    size_tables(raw, "broadcast-*-run*.txt",
                ["ddl (us)", "ddl algbw", "MPI_Bcast (us)", "MPI algbw", "MPI / ddl", "wrong"])


if __name__ == "__main__":
    main()
