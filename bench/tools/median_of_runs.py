#!/usr/bin/env python3
"""Medians over repeated ddl-bench runs (table output), per size and impl.

usage: median_of_runs.py RUN1.txt RUN2.txt ... [--placement oop|ip]

Prints, per size, every implementation's median time (and min-max), the
best strategy measured, and auto's ratio to it.
"""
import statistics
import sys

def rows(path):
    for line in open(path):
        f = line.split()
        if len(f) < 11 or not f[0].isdigit() or f[4] == "floor:copy":
            continue
        yield int(f[0]), f[4], float(f[5]), float(f[10]), (f[15] if len(f) > 15 else "")

def main():
    argv = sys.argv[1:]
    col = 2
    if "--placement" in argv:
        i = argv.index("--placement")
        col = 3 if argv[i + 1] == "ip" else 2
        del argv[i:i + 2]
    args = argv
    data, plan = {}, {}
    for path in args:
        for r in rows(path):
            data.setdefault((r[0], r[1]), []).append(r[col])
            if r[1] == "ddl:auto":
                plan[r[0]] = " ".join(r[4:]) or plan.get(r[0], "")
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
            cells.append(f"{med[i]:.1f} ({min(v):.0f}-{max(v):.0f})")
        others = {i: t for i, t in med.items() if i != "ddl:auto"}
        best = min(others, key=others.get)
        ratio = med["ddl:auto"] / others[best] if "ddl:auto" in med else float("nan")
        print(f"| {s} | " + " | ".join(cells) + f" | {best} | {ratio:.2f} | {plan.get(s, '')} |")

main()
