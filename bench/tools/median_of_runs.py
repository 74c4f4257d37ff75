#!/usr/bin/env python3
"""Medians over repeated ddl-bench runs (table output), per size and impl.

usage: median_of_runs.py RUN1.txt RUN2.txt ... [--placement oop|ip] [--floor] [--old OLD1.txt ...]
       median_of_runs.py RUN1.txt RUN2.txt ... --ip-over-oop

Prints, per size, every implementation's median time (and min-max), the
best strategy measured, and auto's ratio to it. With --floor, each cell
gives the median's share of the memory-traffic floor instead of min-max
(floor = median floor:copy time of the same runs / the impl's median).
With --old, the files after it are runs of another build's `auto` (taken in
turns with RUN1...): its median and ratio to the same best are added.
With --ip-over-oop, each cell is instead an implementation's median in-place
time over its median out-of-place time (no best, no plan).
"""
import statistics
import sys

from bench_table import floor_times, placement, provenance, rows


def ip_over_oop(paths):
    data = {}
    for path in paths:
        for size, impl, oop, ip, _ in rows(path):
            if oop is not None:
                data.setdefault((size, impl), ([], []))
                data[(size, impl)][0].append(ip)
                data[(size, impl)][1].append(oop)
    sizes = sorted({k[0] for k in data})
    impls = []
    for k in data:
        if k[1] not in impls:
            impls.append(k[1])
    print(provenance(paths, "bench/tools/median_of_runs.py " + " ".join(sys.argv[1:])) + "\n")
    print("| size | " + " | ".join(impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for s in sizes:
        cells = []
        for i in impls:
            v = data.get((s, i))
            cells.append(f"{statistics.median(v[0]) / statistics.median(v[1]):.2f}" if v else "-")
        print(f"| {s} | " + " | ".join(cells) + " |")


def main():
    if "--ip-over-oop" in sys.argv:
        return ip_over_oop([a for a in sys.argv[1:] if a != "--ip-over-oop"])
    in_place, args = placement(sys.argv[1:])
    with_floor = "--floor" in args
    args = [a for a in args if a != "--floor"]
    old = []
    if "--old" in args:
        i = args.index("--old")
        args, old = args[:i], args[i + 1:]
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
                # e.g. "multi_ring 4x2 direct-first", or "recursive_doubling; in place one_shot"
                parts = " ".join(f[15:]).split(" [model")[0].split("; in place ")
                note = (parts[-1] if in_place else parts[0]).strip()
                plan[r[0]] = note or plan.get(r[0], "")
    old_auto = {}
    for path in old:
        for r in rows(path):
            if r[1] == "ddl:auto" and r[col] is not None:
                old_auto.setdefault(r[0], []).append(r[col])
    sizes = sorted({k[0] for k in data})
    impls = []
    for k in data:
        if k[1] not in impls:
            impls.append(k[1])
    extra = " old auto | old / best |" if old else ""
    print(provenance(args + old, "bench/tools/median_of_runs.py " + " ".join(sys.argv[1:])) + "\n")
    print("| size | " + " | ".join(impls) + " | best | auto / best | auto's plan |" + extra)
    print("|---" * (len(impls) + 4 + (2 if old else 0)) + "|")
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
        line = f"| {s} | " + " | ".join(cells) + f" | {best} | {ratio:.2f} | {plan.get(s, '')} |"
        if old:
            o = statistics.median(old_auto[s]) if old_auto.get(s) else float("nan")
            line += f" {o:.1f} | {o / others[best]:.2f} |"
        print(line)

main()
