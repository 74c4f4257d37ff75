"""torch.distributed all_reduce through the "ddl" backend beside gloo, in
place, same tensors, same job: median time per size and the ratio.

    mpiexec -n 4 python3 bench/torch/allreduce.py [-b 1M] [-e 256M] [-n 10] [-w 2]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ddl_torch


def parse_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-b", default="1M")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=10)
    p.add_argument("-w", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(1)
    rank, size = ddl_torch.mpi_rank_and_size()
    store = f"/tmp/ddl-torch-bench-{os.getppid()}"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    groups = {"ddl": dist.new_group(backend="ddl"), "gloo": dist.new_group(backend="gloo")}
    world = dist.group.WORLD
    if rank == 0:
        print(f"# torch.distributed all_reduce (sum, float32, in place), {size} ranks, median of {a.n}, "
              f"slowest rank; torch {torch.__version__}")
        print(f"{'size':>8} {'ddl (ms)':>10} {'ddl GB/s':>9} {'gloo (ms)':>10} {'gloo GB/s':>10} {'gloo/ddl':>9}")
    size_b = parse_bytes(a.b)
    buf = torch.ones(parse_bytes(a.e) // 4)
    while size_b <= parse_bytes(a.e):
        t = buf[: size_b // 4]
        times = {}
        for name, g in groups.items():
            samples = []
            for i in range(a.w + a.n):
                t.fill_(1.0)
                dist.barrier(group=world)
                t0 = time.perf_counter()
                dist.all_reduce(t, group=g)
                dt = torch.tensor([time.perf_counter() - t0])
                dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=world)
                if i >= a.w:
                    samples.append(float(dt))
            if not torch.all(t == float(size)):
                sys.exit(f"{name}: wrong result at {size_b} bytes")
            times[name] = statistics.median(samples)
        if rank == 0:
            d, g = times["ddl"], times["gloo"]
            label = f"{size_b >> 20}M" if size_b >= 1 << 20 else f"{size_b >> 10}K"
            print(f"{label:>8} {1e3 * d:10.2f} {size_b / d / 1e9:9.2f} {1e3 * g:10.2f} {size_b / g / 1e9:10.2f} "
                  f"{g / d:9.2f}", flush=True)
        size_b *= a.f
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(store):
        os.remove(store)


if __name__ == "__main__":
    main()
