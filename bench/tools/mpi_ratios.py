#!/usr/bin/env python3
"""Speed-up of ddl over its baselines, from ddl-bench runs over MPI.

usage: mpi_ratios.py [--impl ddl:NAME] [--baseline ROW] RUN1.txt RUN2.txt ...   (same configuration, repeated)

--impl picks the ddl row compared (default ddl:auto, else the first ddl row:
ddl:broadcast, ddl:all_to_all). --baseline picks the row it is compared with
(default the MPI call's; hand:ring for `--baseline ring` runs, threads too).

Works for every --collective: the MPI baseline is the row whose impl starts
with MPI_ (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast,
MPI_Alltoall).

Ratios are taken inside each run (baseline time / ddl time, both measured
side by side on the same buffers), then summarised as the median and the
min-max over the runs. Gloo is in-place only, so every ratio uses the
in-place column; the out-of-place ddl vs MPI_Allreduce ratio is given too.
"""
import statistics
import sys

from bench_table import provenance, take, times as parse

def fmt(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"

args = sys.argv[1:]
chosen = take(args, "--impl")
baseline = take(args, "--baseline")
runs = [parse(p) for p in args]
sizes = sorted({k[0] for r in runs for k in r})
ddl_rows = [k[1] for r in runs for k in r if k[1].startswith("ddl:")]
ddl_impl = chosen or ("ddl:auto" if "ddl:auto" in ddl_rows else (ddl_rows[0] if ddl_rows else "ddl:broadcast"))
mpi_impl = baseline or next((k[1] for r in runs for k in r if k[1].startswith("MPI_")), "MPI_Allreduce")
print(provenance(args, "bench/tools/mpi_ratios.py " + " ".join(sys.argv[1:])) + "\n")
print(f"| size | {ddl_impl} in-place us (median) | {mpi_impl} / ddl, in-place | {mpi_impl} / ddl, out-of-place | best Gloo / ddl, in-place |")
print("|---|---|---|---|---|")
for s in sizes:
    t, mpi_ip, mpi_oop, gloo = [], [], [], []
    for r in runs:
        d = r.get((s, ddl_impl))
        if not d:
            continue
        t.append(d[1])
        m = r.get((s, mpi_impl))
        if m:
            mpi_ip.append(m[1] / d[1])
            if m[0] and d[0]:
                mpi_oop.append(m[0] / d[0])
        g = [r[k][1] for k in r if k[0] == s and k[1].startswith("gloo:")]
        if g:
            gloo.append(min(g) / d[1])
    print(f"| {s} | {statistics.median(t):.1f} ({min(t):.0f}-{max(t):.0f}) | {fmt(mpi_ip)} | {fmt(mpi_oop)} | {fmt(gloo)} |")
