#!/usr/bin/env python3
"""Summary of repeated emulated-cluster runs (bench/cluster/run.sh output).

usage: cluster_summary.py RUN1.txt RUN2.txt ... [--placement oop|ip]

Per size: auto's median time, its ratio to MPI_Allreduce and to the flat
ring (ratios taken per run, then median and min-max), and the cost model's
prediction for auto's plan against the median measured time.
"""
import re
import statistics
import sys

from bench_table import placement, provenance, rows


def parse(path, in_place):
    out, model = {}, {}
    for size, impl, oop, ip, line in rows(path):
        out[(size, impl)] = ip if in_place else oop
        m = re.search(r"\[model ([0-9.]+) us\]", line)
        if impl == "ddl:auto" and m:
            model[size] = (float(m.group(1)), line.split("  ")[-1].split(" [")[0].strip())
    return out, model


def stat(v):
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))


def main():
    in_place, argv = placement(sys.argv[1:])
    runs = [parse(p, in_place) for p in argv]
    sizes = sorted({k[0] for r, _ in runs for k in r})
    print(provenance(argv, "bench/tools/cluster_summary.py " + " ".join(sys.argv[1:])) + "\n")
    print("| size | auto (ms) | plan | auto vs MPI_Allreduce | auto vs flat ring | model (ms) | measured / model |")
    print("|---|---|---|---|---|---|---|")
    for s in sizes:
        auto = [r[(s, "ddl:auto")] for r, _ in runs if (s, "ddl:auto") in r]
        vs_mpi = [r[(s, "MPI_Allreduce")] / r[(s, "ddl:auto")] for r, _ in runs if (s, "MPI_Allreduce") in r]
        vs_ring = [r[(s, "ddl:ring")] / r[(s, "ddl:auto")] for r, _ in runs if (s, "ddl:ring") in r]
        model = next((m[s] for _, m in runs if s in m), (0.0, "?"))
        med = statistics.median(auto)
        print("| %d MiB | %.1f | %s | %s | %s | %.1f | %.2f |" % (
            s >> 20, med / 1e3, model[1], stat(vs_mpi), stat(vs_ring), model[0] / 1e3,
            med / model[0] if model[0] else 0))


if __name__ == "__main__":
    main()
