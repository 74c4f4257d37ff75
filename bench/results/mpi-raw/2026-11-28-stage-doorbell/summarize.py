#!/usr/bin/env python3
"""Medians over the runs of run.sh's output: OLD and NEW us per call and NEW/OLD,
per load, ranks, strategy and size, out of place | in place. usage: summarize.py DIR"""
import collections, glob, os, re, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else "."
t = collections.defaultdict(list)  # (load, n, impl, bytes, placement, version) -> us
for f in glob.glob(os.path.join(d, "*-n*-run*.txt")):
    v, load, n = re.match(r"(old|new)-(alone|busy)-n(\d+)-run\d+\.txt", os.path.basename(f)).groups()
    for line in open(f):
        w = line.split()
        if len(w) >= 11 and w[0].isdigit() and w[4].startswith("ddl:"):
            t[(load, int(n), w[4][4:], int(w[0]), "out", v)].append(float(w[5]))
            t[(load, int(n), w[4][4:], int(w[0]), "in", v)].append(float(w[10]))
keys = sorted({k[:5] for k in t})
print("load ranks strategy bytes placement old_us new_us new/old")
for k in keys:
    o, nw = t.get(k + ("old",)), t.get(k + ("new",))
    if o and nw:
        mo, mn = statistics.median(o), statistics.median(nw)
        print(*k, f"{mo:.1f}", f"{mn:.1f}", f"{mn / mo:.2f}")
