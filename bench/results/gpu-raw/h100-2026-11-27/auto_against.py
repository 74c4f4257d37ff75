#!/usr/bin/env python3
"""auto's medians in one run (rep*-auto.txt) against the best strategy's
medians in another (rep*-<strategy>.txt): usage auto_against.py AUTO_DIR BEST_DIR."""
import collections, glob, statistics, sys

def load(d, st):
    t, plan = collections.defaultdict(list), collections.defaultdict(set)
    for f in glob.glob(f"{d}/rep*-{st}.txt"):
        for line in open(f):
            w = line.split()
            if len(w) >= 8 and w[0].isdigit():
                t[(int(w[0]), int(w[1]))].append(float(w[2]))
                plan[(int(w[0]), int(w[1]))].add(w[7])
    return {k: statistics.median(v) for k, v in t.items()}, plan

auto, plans = load(sys.argv[1], "auto")
best = {}
for st in ["two_shot", "one_shot", "ring", "halving_doubling", "recursive_doubling"]:
    for k, v in load(sys.argv[2], st)[0].items():
        if k not in best or v < best[k][0]:
            best[k] = (v, st)
print("ranks bytes auto_us auto_plan best_us best_strategy auto/best")
for k in sorted(auto):
    if k in best:
        print(k[0], k[1], f"{auto[k]:.1f}", ",".join(sorted(plans[k])), f"{best[k][0]:.1f}", best[k][1],
              f"{auto[k] / best[k][0]:.2f}")
