#!/usr/bin/env python3
"""MPI_Allreduce time / ddl auto time per ranks and size, median (min-max) over the runs,
out of place and in place. usage: summarize.py DIR (files nN-runI.txt of ddl-bench --baseline mpi)"""
import collections, glob, os, re, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else "."
r = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(d, "n*-run*.txt"))):
    n = re.search(r"n(\d+)-run", f).group(1)
    t = {}
    for line in open(f):
        w = line.split()
        if len(w) >= 11 and w[0].isdigit() and w[4] in ("ddl:auto", "MPI_Allreduce"):
            t[(w[0], w[4])] = (float(w[5]), float(w[10]))
    for s in {k[0] for k in t}:
        a, m = t[(s, "ddl:auto")], t[(s, "MPI_Allreduce")]
        r[(int(n), int(s))].append((m[0] / a[0], m[1] / a[1]))
print("ranks bytes out_of_place in_place")
for k in sorted(r):
    v = r[k]
    cell = lambda i: "%.2f (%.2f-%.2f)" % (statistics.median(x[i] for x in v), min(x[i] for x in v), max(x[i] for x in v))
    print(*k, cell(0), cell(1))
