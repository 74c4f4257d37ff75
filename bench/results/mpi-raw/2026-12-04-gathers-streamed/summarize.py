#!/usr/bin/env python3
"""Medians of the streamed form, cached two_shot, auto and the MPI call per binary (old, new),
size, placement of the calls (oop, ip) and placement of the vCPUs (far: cached two_shot more
than 2x the streamed form in that row's run, else close). us a call. Reads this folder's runs,
or those of the folder given (every-size/, in-place-too/: the versions tried before the kept one)."""
import glob, os, re, statistics, sys
here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(here, "*_run*.txt"))):
    which, kind = re.match(r"(old|new)_(n2|n4|ag_n2)_run", os.path.basename(f)).groups()
    t = {}
    for line in open(f):
        p = line.split()
        if len(p) > 11 and p[0].isdigit() and (p[4].startswith("ddl:") or p[4].startswith("MPI_")):
            t[(int(p[0]), p[4])] = (float(p[5]), float(p[10]))
    for (size, impl), (oop, ip) in t.items():
        cached, streamed = t.get((size, "ddl:two_shot")), t.get((size, "ddl:two_shot_stream"))
        for k, place in ((0, "oop"), (1, "ip")):
            far = cached and streamed and cached[k] > 2 * streamed[k]
            rows.setdefault((kind, size, place, "far" if far else "close", impl, which), []).append((oop, ip)[k])
kinds = {"n2": "all-reduce, 2 ranks", "n4": "all-reduce, 4 ranks", "ag_n2": "all-gather, 2 ranks"}
print("| collective | size | placement | vCPUs | impl | old (runs) | new (runs) | old / new |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted({k[:5] for k in rows}):
    kind, size, place, where, impl = key
    o, n = rows.get(key + ("old",), []), rows.get(key + ("new",), [])
    if not o or not n: continue
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"| {kinds[kind]} | {size >> 20} MiB | {place} | {where} | {impl} | {mo:.0f} ({len(o)}) | {mn:.0f} ({len(n)}) | {mo / mn:.2f} |")
