#!/usr/bin/env python3
"""run.sh's files: each size, each run's placement of the two vCPUs read off the cached stages
(far: two_shot through cached stages slower than 2x the streamed one, both placements of the
call, as at a cache line's round trip of ~320 ns; close otherwise), then per placement the
median (min-max) us a call of every implementation, and the MPI call's time / ddl:auto's
(all-reduces n*_run*.txt, all-gathers ag_n*_run*.txt, reduce-scatters rs_n*_run*.txt; all-reduces over MPICH mpich_n*_run*.txt).
usage: summarize.py [DIR]   (default: this folder) > summary.txt"""
import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "tools"))
from bench_table import median_range as fmt, times  # noqa: E402

folder = sys.argv[1] if len(sys.argv) > 1 else here
for prefix, what, mpi, n in (("", "all-reduce", "MPI_Allreduce", 2), ("", "all-reduce", "MPI_Allreduce", 4),
                             ("ag_", "all-gather", "MPI_Allgather", 2),
                             ("rs_", "reduce-scatter", "MPI_Reduce_scatter_block", 2),
                             ("mpich_", "all-reduce (MPICH)", "MPI_Allreduce", 2)):
    impls = ("ddl:two_shot", "ddl:two_shot_stream", "ddl:two_shot_read", "ddl:auto", mpi)
    runs = [times(p) for p in sorted(glob.glob(f"{folder}/{prefix}n{n}_run*.txt"))]
    if not runs:
        continue
    sizes = sorted({s for s, impl in runs[0] if impl == "ddl:auto"})
    for s in sizes:
        for col, label in ((0, "out of place"), (1, "in place")):
            groups = {"close": [], "far": []}
            for r in runs:
                if (s, "ddl:two_shot") not in r:
                    continue
                cached, streamed = r[(s, "ddl:two_shot")][col], r[(s, "ddl:two_shot_stream")][col]
                groups["far" if cached > 2 * streamed else "close"].append(r)
            size = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
            print(f"\n{what}, {n} ranks, {size}, {label}: us a call, median (min-max) of the runs")
            for place, rs in groups.items():
                if not rs:
                    continue
                cells = "  ".join(f"{i.split(':')[-1]} {fmt([r[(s, i)][col] for r in rs], 0)}" for i in impls)
                ratio = fmt([r[(s, mpi)][col] / r[(s, 'ddl:auto')][col] for r in rs], 2)
                print(f"  {place:>5} ({len(rs)} runs): {cells}  | MPI/auto {ratio}")
