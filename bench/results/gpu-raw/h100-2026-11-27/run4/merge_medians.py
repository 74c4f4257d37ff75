#!/usr/bin/env python3
"""Every strategy at 8 B-256 MiB for ddl-cuda-cost-fit, from runs 2 and 4:
ring, recursive and halving doubling from run 2 (8 B-32 KiB, 1-256 MiB);
one_shot and two_shot from run 4 below 1 MiB (one_shot's kernel in several
blocks), from run 2 at 1-256 MiB; recursive doubling at 2 ranks, 128-512
KiB from run 4's auto, which ran it there. usage: merge_medians.py OUTDIR
(from bench/results/gpu-raw/h100-2026-11-27)."""
import collections, glob, os, statistics, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
al = ["ring", "recursive_doubling", "halving_doubling", "one_shot", "two_shot"]
t = collections.defaultdict(dict)
for a in al:
    for line in open(f"run2/medians/allreduce-{a}.txt"):
        if line.startswith("#"):
            continue
        n, b, u = line.split()
        if a in ("one_shot", "two_shot") and int(b) < 1 << 20:
            continue
        t[a][(int(n), int(b))] = float(u)
r4, plan = collections.defaultdict(list), collections.defaultdict(set)
for f in glob.glob("run4/rep*-*.txt"):
    st = f.split("-", 1)[1][:-4]
    if st.endswith("8B"):
        continue
    for line in open(f):
        w = line.split()
        if len(w) >= 8 and w[0].isdigit():
            r4[(st, int(w[0]), int(w[1]))].append(float(w[2]))
            plan[(st, int(w[0]), int(w[1]))].add(w[7])
for (st, n, b), v in r4.items():
    if b >= 1 << 20:
        continue
    if st in ("one_shot", "two_shot"):
        t[st][(n, b)] = statistics.median(v)
    if st == "auto" and plan[(st, n, b)] == {"recursive_doubling"}:
        t["recursive_doubling"][(n, b)] = statistics.median(v)
for a in al:
    with open(f"{out}/allreduce-{a}.txt", "w") as f:
        f.write(f"# {a}: runs 2 and 4 merged (merge_medians.py): ranks, bytes, us\n")
        for (n, b), u in sorted(t[a].items()):
            f.write(f"{n} {b} {u:.1f}\n")
