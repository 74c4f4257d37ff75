#!/usr/bin/env python3
"""The README's headline figures from bench/tools/headline_runs.sh's runs:
min / median / max over the runs of each ratio, as a markdown table.

usage: headline_summary.py OUT_DIR
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import floor_times, provenance, times  # noqa: E402


def spread(v, digits=2, unit=""):
    if not v:
        return "-"
    return (f"{min(v):.{digits}f}{unit} / **{statistics.median(v):.{digits}f}{unit}** / "
            f"{max(v):.{digits}f}{unit} ({len(v)} runs)")


def main():
    raw = sys.argv[1]
    rows = []
    # 1. ddl auto against MPI_Allreduce, in place.
    mpi = sorted(glob.glob(os.path.join(raw, "mpi-n4-run*.txt")))
    for size in (16 << 20, 64 << 20):
        r = []
        for path in mpi:
            t = times(path)
            if (size, "ddl:auto") in t and (size, "MPI_Allreduce") in t:
                r.append(t[(size, "MPI_Allreduce")][1] / t[(size, "ddl:auto")][1])
        rows.append((f"all-reduce in place, 4 MPI ranks, {size >> 20} MiB: MPI_Allreduce time / ddl auto time",
                     spread(r, 2, "x")))
    # 2. exposed share of the all-reduce with bucketed async.
    for ratio in ("1.00", "1.50"):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "overlap-resnet50-mpi-n4-run*.txt"))):
            for line in open(path):
                f = line.split()
                if len(f) >= 7 and f[0] == ratio and f[1:3] == ["bucketed", "async"]:
                    r.append(float(f[6].rstrip("%")))
        rows.append((f"ResNet-50 backward pass, compute = {ratio}x the all-reduce, 4 MPI ranks: "
                     "all-reduce left exposed by bucketed async", spread(r, 1, "%")))
    # 3. torch all_reduce, ddl against gloo.
    for size in ("16M", "64M"):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "torch-all_reduce-n4-run*.txt"))):
            for line in open(path):
                f = line.split()
                if len(f) == 6 and f[0] == size:
                    r.append(float(f[5]))
        rows.append((f"torch.distributed all_reduce, 4 ranks under torchrun, {size}B: gloo time / ddl time",
                     spread(r, 2, "x")))
    # 4. threads against the memory-traffic floor, in place.
    for impl in ("ddl:ring", "ddl:auto"):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "threads-n4-run*.txt"))):
            t, fl = times(path), floor_times(path)
            if (64 << 20, impl) in t and (64 << 20) in fl:
                r.append(fl[64 << 20] / t[(64 << 20, impl)][1])
        if r:
            rows.append((f"all-reduce in place, 4 threads, 64 MiB: {impl[4:]}'s share of the memory-traffic floor",
                         spread(r, 2)))
    # 5. ddl auto against oneCCL in one Intel MPI job, in place.
    for size in (16 << 20, 64 << 20):
        r = []
        for path in sorted(glob.glob(os.path.join(raw, "oneccl-n4-run*.txt"))):
            t = times(path)
            if (size, "ddl:auto") in t and (size, "oneCCL_allreduce") in t:
                r.append(t[(size, "oneCCL_allreduce")][1] / t[(size, "ddl:auto")][1])
        if r:
            rows.append((f"all-reduce in place, 4 ranks, {size >> 20} MiB: oneCCL time / ddl auto time", spread(r, 2, "x")))
    # 6. 2 and 8 Open MPI ranks: ddl auto against MPI_Allreduce and Gloo's faster algorithm, in place.
    for n in (2, 8):
        for size in (16 << 20, 256 << 20):
            mpi, gloo = [], []
            for path in sorted(glob.glob(os.path.join(raw, f"sweep-n{n}-run*.txt"))):
                t = times(path)
                if (size, "ddl:auto") not in t:
                    continue
                ddl = t[(size, "ddl:auto")][1]
                if (size, "MPI_Allreduce") in t:
                    mpi.append(t[(size, "MPI_Allreduce")][1] / ddl)
                g = [v[1] for (s, impl), v in t.items() if s == size and impl.startswith("gloo:")]
                if g:
                    gloo.append(min(g) / ddl)
            if mpi:
                rows.append((f"all-reduce in place, {n} MPI ranks, {size >> 20} MiB: MPI_Allreduce time / ddl auto time",
                             spread(mpi, 2, "x")))
            if gloo:
                rows.append((f"all-reduce in place, {n} MPI ranks, {size >> 20} MiB: Gloo's faster algorithm / ddl auto",
                             spread(gloo, 2, "x")))
    # 7. the same on shared buffers, against MPI_Allreduce.
    for n in (2, 8):
        for size in (16 << 20, 256 << 20):
            r = []
            for path in sorted(glob.glob(os.path.join(raw, f"shared-n{n}-run*.txt"))):
                t = times(path)
                if (size, "ddl:auto") in t and (size, "MPI_Allreduce") in t:
                    r.append(t[(size, "MPI_Allreduce")][1] / t[(size, "ddl:auto")][1])
            if r:
                rows.append((f"all-reduce in place on shared buffers, {n} MPI ranks, {size >> 20} MiB: "
                             "MPI_Allreduce time / ddl auto time", spread(r, 2, "x")))
    # 8. ddl over UCX against ddl over MPI (jobs back to back) and MPI_Allreduce (in the UCX job).
    for size in (16 << 20, 256 << 20):
        over_mpi, allreduce = [], []
        for path in sorted(glob.glob(os.path.join(raw, "ucx-ucx-n4-run*.txt"))):
            u = times(path)
            m = times(path.replace("ucx-ucx-", "ucx-mpi-"))
            if (size, "ddl:auto") not in u:
                continue
            if (size, "ddl:auto") in m:
                over_mpi.append(u[(size, "ddl:auto")][1] / m[(size, "ddl:auto")][1])
            if (size, "MPI_Allreduce") in u:
                allreduce.append(u[(size, "MPI_Allreduce")][1] / u[(size, "ddl:auto")][1])
        if over_mpi:
            rows.append((f"all-reduce in place, 4 ranks, {size >> 20} MiB: ddl over UCX time / ddl over MPI time",
                         spread(over_mpi, 2)))
        if allreduce:
            rows.append((f"all-reduce in place, 4 ranks, {size >> 20} MiB: MPI_Allreduce time / ddl over UCX time",
                         spread(allreduce, 2, "x")))
    files = sorted(glob.glob(os.path.join(raw, "*-run*.txt")))
    print(provenance(files, f"bench/tools/headline_runs.sh BUILD RUNS {raw}"))
    print()
    print("| figure | min / **median** / max |")
    print("|---|---|")
    for name, v in rows:
        if v != "-":  # a figure this folder's runs did not measure (FIGURES=...)
            print(f"| {name} | {v} |")


if __name__ == "__main__":
    main()
