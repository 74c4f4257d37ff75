#!/usr/bin/env python3
"""Medians over the repeats (rep<i>-<strategy>.txt) of ddl-gpu-bench allreduce
tables: time per strategy, ranks and size; the best strategy and auto's plan.
usage: summarize.py DIR [MEDIANS_DIR]: with MEDIANS_DIR, also writes the
medians there as allreduce-<strategy>.txt (ranks, bytes, us), the input of
bench/tools/cuda_cost_fit.cpp (two_shot: the whole call, flagged_two_shot)."""
import glob, os, re, statistics, sys
from collections import defaultdict
d = sys.argv[1] if len(sys.argv) > 1 else "."
t = defaultdict(list)   # (strategy, ranks, size) -> times
plan = defaultdict(list)
wrong = 0
for f in sorted(glob.glob(os.path.join(d, "rep*-*.txt"))):
    st = re.match(r"rep\d+-(.*)\.txt", os.path.basename(f)).group(1)
    for line in open(f):
        w = line.split()
        if len(w) < 8 or not w[0].isdigit():
            continue
        key = (st, int(w[0]), int(w[1]))
        t[key].append(float(w[2]))
        wrong += int(w[6])
        if st == "auto":
            plan[key].append(w[7])
if len(sys.argv) > 2:
    os.makedirs(sys.argv[2], exist_ok=True)
    for st in {k[0] for k in t}:
        with open(os.path.join(sys.argv[2], f"allreduce-{st}.txt"), "w") as out:
            out.write(f"# medians of {d}/rep*-{st}.txt: ranks, bytes, us\n")
            for k in sorted(k for k in t if k[0] == st):
                out.write(f"{k[1]} {k[2]} {statistics.median(t[k]):.1f}\n")
strats = ["two_shot", "two_shot-messages", "one_shot", "recursive_doubling", "halving_doubling", "ring"]
names = {"two_shot": "2shot whole", "two_shot-messages": "2shot msgs", "one_shot": "one_shot",
         "recursive_doubling": "rd", "halving_doubling": "hd", "ring": "ring"}
print(f"wrong elements in all rows: {wrong}")
print("| ranks | size | " + " | ".join(names[s] for s in strats) + " | auto (plan) | auto / best | whole / msgs |")
print("| ---: | ---: | " + " | ".join("---:" for _ in strats) + " | --- | ---: | ---: |")
keys = sorted({(k[1], k[2]) for k in t})
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else (f"{b >> 10} KiB" if b >= 1024 else f"{b} B")
for n, s in keys:
    row = {st: statistics.median(t[(st, n, s)]) for st in strats if (st, n, s) in t}
    if not row:
        continue
    best = min(row, key=row.get)
    cells = []
    for st in strats:
        v = row.get(st)
        cells.append("-" if v is None else (f"**{v:.1f}**" if st == best else f"{v:.1f}"))
    a = t.get(("auto", n, s))
    am = statistics.median(a) if a else None
    pl = ",".join(sorted(set(plan.get(("auto", n, s), []))))
    ratio = f"{am / row[best]:.2f}" if am else "-"
    wm = f"{row['two_shot'] / row['two_shot-messages']:.2f}" if "two_shot" in row and "two_shot-messages" in row else "-"
    print(f"| {n} | {size(s)} | " + " | ".join(cells) + f" | {am:.1f} ({pl}) | {ratio} | {wm} |" if am else
          f"| {n} | {size(s)} | " + " | ".join(cells) + f" | - | - | {wm} |")
