#!/usr/bin/env python3
"""gloo time / ddl time per collective, size and rank count, median of the
rounds in the current folder (min-max), and ddl's ms: summarize.py > summary.txt
(run in a folder of collectives.py outputs named COLLECTIVE-nN-rR.txt)"""
import glob
import re
import statistics

data = {}
for f in glob.glob("*-n*-r*.txt"):
    c, n = re.match(r"(.+)-n(\d+)-r\d+\.txt", f).groups()
    for line in open(f):
        p = line.split()
        if len(p) == 6 and p[0][-1] in "KM" and p[0][:-1].isdigit():
            data.setdefault((c, int(n), p[0]), []).append((float(p[5]), float(p[1])))
sizes = sorted({k[2] for k in data}, key=lambda s: int(s[:-1]) << (10 if s[-1] == "K" else 20))
for n in sorted({k[1] for k in data}):
    print(f"## {n} ranks: gloo / ddl, median of the rounds (min-max); ddl ms (median)")
    print("| collective | " + " | ".join(sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    known = ("reduce", "gather", "scatter", "all_reduce", "broadcast", "all_gather", "all_to_all")
    for c in [c for c in known if any(k[0] == c for k in data)]:
        cells = []
        for s in sizes:
            v = data.get((c, n, s), [])
            if not v:
                cells.append("")
                continue
            r, ms = [x[0] for x in v], [x[1] for x in v]
            cells.append(f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}); {statistics.median(ms):.2f}")
        print(f"| {c} | " + " | ".join(cells) + " |")
    print()
