#!/usr/bin/env python3
"""Per rank count and size: ddl's in-place broadcast µs in each round (old, new)
and MPI_Bcast time / ddl time inside each run, median over the rounds.
usage: summarize.py DIR (files {old,new}-nN-rR.txt)"""
import collections, glob, re, statistics, sys
d = collections.defaultdict(list)
for f in sorted(glob.glob(f"{sys.argv[1]}/*.txt")):
    b, n, r = re.match(r".*/(old|new)-n(\d)-r(\d).txt", f).groups()
    for line in open(f):
        x = line.split()
        if len(x) > 11 and x[0].isdigit() and x[4] in ("ddl:broadcast", "MPI_Bcast"):
            d[(int(n), int(x[0]), b, x[4])].append(float(x[10]))
for n in sorted({k[0] for k in d}):
    for s in sorted({k[1] for k in d if k[0] == n}):
        o, w = d[(n, s, "old", "ddl:broadcast")], d[(n, s, "new", "ddl:broadcast")]
        mo, mw = d[(n, s, "old", "MPI_Bcast")], d[(n, s, "new", "MPI_Bcast")]
        ro = statistics.median([a / b for a, b in zip(mo, o)])
        rw = statistics.median([a / b for a, b in zip(mw, w)])
        print(f"n={n} {s:>8} B  ddl old {o} new {w}  MPI_Bcast/ddl old {ro:.2f} new {rw:.2f}")
