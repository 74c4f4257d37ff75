#!/usr/bin/env python3
"""rounds.sh's csv: per rank count and size, each binary's ddl broadcast us a call (median of the
rounds) and MPI_Bcast / ddl (median, min-max).  usage: rounds.py OUT.csv"""
import collections
import statistics
import sys

d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) < 15 or f[6].startswith("floor"):
        continue
    d[(int(f[14]), int(f[2]), f[0])][(f[1], f[6])] = float(f[8])
bins = sorted({k[2] for k in d})
print("ranks size | " + " | ".join(b + ": ddl us, MPI_Bcast/ddl" for b in bins))
for n, size in sorted({(k[0], k[1]) for k in d}):
    row = []
    for b in bins:
        x = d.get((n, size, b), {})
        reps = sorted({r for r, _ in x if (r, "ddl:broadcast") in x and (r, "MPI_Bcast") in x})
        ts = [x[(r, "ddl:broadcast")] for r in reps]
        ra = [x[(r, "MPI_Bcast")] / x[(r, "ddl:broadcast")] for r in reps]
        row.append(f"{statistics.median(ts):.3f} {statistics.median(ra):.2f} ({min(ra):.2f}-{max(ra):.2f})" if ra else "-")
    print(n, size, "| " + " | ".join(row))
