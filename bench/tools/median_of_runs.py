#!/usr/bin/env python3
"""Medians over repeated ddl-bench runs (table output), per size and impl.

usage: median_of_runs.py RUN1.txt RUN2.txt ... [--placement oop|ip]

Prints, per size, every implementation's median time (and min-max), the
best strategy measured, and auto's ratio to it. With --floor, each cell
gives the median's share of the memory-traffic floor instead of min-max
(floor = median floor:copy time of the same runs / the impl's median).
"""
import statistics
import sys

from bench_table import floor_times, placement, rows


def main():
    in_place, args = placement(sys.argv[1:])
    with_floor = "--floor" in args
    args = [a for a in args if a != "--floor"]
    floors = {}
    for path in args:
        for size, t in floor_times(path).items():
            floors.setdefault(size, []).append(t)
    col = 3 if in_place else 2
    data, plan = {}, {}
    for path in args:
        for r in rows(path):
            if r[col] is not None:
                data.setdefault((r[0], r[1]), []).append(r[col])
            if r[1] == "ddl:auto":
                f = r[4].split()
                note = " ".join(f[15:]).split(" [model")[0].split(";")[0].strip()  # e.g. "multi_ring 4x2 direct-first"
                plan[r[0]] = note or plan.get(r[0], "")
    sizes = sorted({k[0] for k in data})
    impls = []
    for k in data:
        if k[1] not in impls:
            impls.append(k[1])
    print("| size | " + " | ".join(impls) + " | best | auto / best | auto's plan |")
    print("|---" * (len(impls) + 4) + "|")
    for s in sizes:
        cells, med = [], {}
        for i in impls:
            v = data.get((s, i), [])
            if not v:
                cells.append("-")
                continue
            med[i] = statistics.median(v)
            if with_floor and floors.get(s):
                cells.append(f"{med[i]:.1f} ({statistics.median(floors[s]) / med[i]:.2f})")
            else:
                cells.append(f"{med[i]:.1f} ({min(v):.0f}-{max(v):.0f})")
        others = {i: t for i, t in med.items() if i != "ddl:auto"}
        best = min(others, key=others.get)
        ratio = med["ddl:auto"] / others[best] if "ddl:auto" in med else float("nan")
        print(f"| {s} | " + " | ".join(cells) + f" | {best} | {ratio:.2f} | {plan.get(s, '')} |")

main()
