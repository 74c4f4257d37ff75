#!/usr/bin/env python3
"""Run 4's tables: medians of three runs of one_shot, two_shot and auto at
8 B-1 MiB (rep<i>-<strategy>.txt) and of the 8-byte calls (rep<i>-<strategy>-8B.txt)."""
import collections, glob, statistics
t, plan, wrong = collections.defaultdict(list), collections.defaultdict(set), 0
for f in glob.glob("rep*-*.txt"):
    st = f.split("-", 1)[1][:-4]
    for line in open(f):
        w = line.split()
        if len(w) >= 8 and w[0].isdigit():
            t[(st, int(w[0]), int(w[1]))].append(float(w[2]))
            wrong += int(w[6])
            plan[(st, int(w[0]), int(w[1]))].add(w[7])
print("wrong", wrong)
print("ranks bytes one_shot two_shot auto(plan) auto/best")
for n in (2, 4, 8):
    for b in sorted({k[2] for k in t if k[1] == n and k[0] == "one_shot"}):
        o, w, a = (statistics.median(t[(s, n, b)]) for s in ("one_shot", "two_shot", "auto"))
        print(n, b, f"{o:.1f}", f"{w:.1f}", f"{a:.1f}({','.join(sorted(plan[('auto', n, b)]))})", f"{a / min(o, w):.2f}")
for st in ("one_shot-8B", "two_shot-8B", "auto-8B"):
    for n in (2, 4, 8):
        v = t[(st, n, 8)]
        print(st, n, [f"{x:.1f}" for x in v], f"median {statistics.median(v):.1f}")
