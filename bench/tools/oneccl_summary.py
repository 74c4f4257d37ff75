#!/usr/bin/env python3
"""ddl beside oneCCL: the tables and plots of bench/results/oneccl.md from
bench/tools/oneccl_runs.sh's output.

usage: oneccl_summary.py RAWDIR [PLOTPREFIX]

Per collective and rank count, per size: the median over the runs of ddl
auto's time and oneCCL's (in place, then out of place), their ratio
(oneCCL / ddl: above 1, ddl is faster) and Intel MPI's call's time in the
same job. With PLOTPREFIX, one gnuplot picture per rank count
(PLOTPREFIX-nN.png, with its data, .dat, beside it): all-reduce in place, time
per call against size, for ddl and oneCCL (Intel MPI job), Intel MPI's and
Open MPI's MPI_Allreduce, ddl over Open MPI, and Gloo (the faster of its two
algorithms per run).
"""
import glob
import os
import statistics
import subprocess
import sys

from bench_table import provenance, times

COLLS = {"all_reduce": ("oneCCL_allreduce", "MPI_Allreduce"),
         "reduce_scatter": ("oneCCL_reduce_scatter", "MPI_Reduce_scatter_block"),
         "all_gather": ("oneCCL_allgather", "MPI_Allgather")}


def med(v):
    return statistics.median(v) if v else None


def gather(files, impl, which):
    """{size: [us per run]} of `impl` (which: 0 out of place, 1 in place)."""
    out = {}
    for f in files:
        for (size, name), t in times(f).items():
            if name == impl and t[which] is not None:
                out.setdefault(size, []).append(t[which])
    return out


def gloo_best(files):
    out = {}
    for f in files:
        per = {}
        for (size, name), t in times(f).items():
            if name.startswith("gloo:"):
                per[size] = min(per.get(size, float("inf")), t[1])
        for size, v in per.items():
            out.setdefault(size, []).append(v)
    return out


def fmt(us):
    if us is None:
        return "-"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def size_name(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def table(raw, coll, n):
    files = sorted(glob.glob(os.path.join(raw, f"oneccl_{coll}_n{n}_run*.txt")))
    if not files:
        return None
    ccl, mpi = COLLS[coll]
    ddl_ip, ccl_ip, mpi_ip = (gather(files, k, 1) for k in ("ddl:auto", ccl, mpi))
    ddl_oop, ccl_oop = (gather(files, k, 0) for k in ("ddl:auto", ccl))
    lines = [f"| size | ddl in place | oneCCL in place | **ratio** | Intel MPI in place | ddl out of place | "
             f"oneCCL out of place | ratio |", "|---|---|---|---|---|---|---|---|"]
    worst = None
    for size in sorted(ddl_ip):
        d, c, m = med(ddl_ip.get(size, [])), med(ccl_ip.get(size, [])), med(mpi_ip.get(size, []))
        do, co = med(ddl_oop.get(size, [])), med(ccl_oop.get(size, []))
        r = c / d if c and d else None
        ro = co / do if co and do else None
        if r is not None:
            worst = r if worst is None else min(worst, r)
        lines.append(f"| {size_name(size)} | {fmt(d)} | {fmt(c)} | **{r:.2f}x** | {fmt(m)} | {fmt(do)} | {fmt(co)} | "
                     f"{ro:.2f}x |" if r is not None and ro is not None else
                     f"| {size_name(size)} | {fmt(d)} | {fmt(c)} | - | {fmt(m)} | {fmt(do)} | {fmt(co)} | - |")
    return lines, len(files), worst, files


def plot(raw, n, prefix):
    ccl_files = sorted(glob.glob(os.path.join(raw, f"oneccl_all_reduce_n{n}_run*.txt")))
    ompi_files = sorted(glob.glob(os.path.join(raw, f"ompi_all_reduce_n{n}_run*.txt")))
    if not ccl_files:
        return
    series = [("ddl auto (Intel MPI job)", gather(ccl_files, "ddl:auto", 1)),
              ("oneCCL", gather(ccl_files, "oneCCL_allreduce", 1)),
              ("Intel MPI MPI_Allreduce", gather(ccl_files, "MPI_Allreduce", 1)),
              ("ddl auto (Open MPI job)", gather(ompi_files, "ddl:auto", 1)),
              ("Open MPI MPI_Allreduce", gather(ompi_files, "MPI_Allreduce", 1)),
              ("Gloo (faster of two)", gloo_best(ompi_files))]
    sizes = sorted({s for _, d in series for s in d})
    dat = f"{prefix}-n{n}.dat"
    with open(dat, "w") as f:
        f.write("# size(B) " + " | ".join(t for t, _ in series) + " : median us over the runs, in place\n")
        for s in sizes:
            f.write(f"{s} " + " ".join(f"{med(d[s]):.1f}" if s in d else "NaN" for _, d in series) + "\n")
    script = (f'set terminal pngcairo size 900,560\nset output "{os.path.basename(prefix)}-n{n}.png"\n'
              f'set title "all-reduce in place, float32 sum, {n} ranks on 2 cores: time per call (median of runs)"\n'
              'set termoption noenhanced\nset logscale xy\nset xlabel "bytes per rank"\nset ylabel "microseconds"\n'
              'set key top left\nset format x "%.0s%cB"\nset grid\n')
    script += "plot " + ", ".join(f'"{os.path.basename(dat)}" using 1:{i + 2} with linespoints title "{t}"'
                                  for i, (t, _) in enumerate(series)) + "\n"
    subprocess.run(["gnuplot"], input=script, text=True, cwd=os.path.dirname(dat) or ".", check=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    raw = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else None
    for coll in COLLS:
        for n in (2, 4, 8):
            t = table(raw, coll, n)
            if not t:
                continue
            lines, runs, worst, files = t
            low = f"{worst:.2f}x" if worst is not None else "-"
            print(f"\n### {coll}, {n} ranks (median of {runs} runs; ratio = oneCCL / ddl, above 1 ddl is faster; "
                  f"lowest in place {low})\n")
            print(provenance(files, f"bench/tools/oneccl_runs.sh {raw} {runs}") + "\n")
            print("\n".join(lines))
    if prefix:
        for n in (2, 4, 8):
            plot(raw, n, prefix)


if __name__ == "__main__":
    main()
