"""A torch.distributed collective through the "ddl" backend beside gloo, same
tensors, same job: median time per size (the slowest rank's) and the ratio.

    mpiexec -n 4 python3 bench/torch/collectives.py [--collective all_reduce] [-b 1M] [-e 256M] [-n 10] [-w 2]
    ddl-run -n 4 python3 bench/torch/collectives.py ...   # ddl over UCX

--collective: all_reduce (sum, in place), broadcast, reduce (sum), gather,
scatter (root 0), all_gather (into a list), all_gather_into_tensor,
reduce_scatter_tensor (sum), all_to_all (all_to_all_single, equal parts) or sendrecv (point-to-point: every rank's tensor to the next rank,
irecv from the previous one then isend, both waited for); the size is each
rank's tensor (a gather's and an all_gather's part, a scatter's output, an
all-to-all's input and output, a transfer). Every call's result is checked
after the timed ones.
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
    p.add_argument("--collective", default="all_reduce",
                   choices=["all_reduce", "broadcast", "reduce", "gather", "scatter", "all_gather", "all_to_all",
                            "sendrecv", "all_gather_into_tensor", "reduce_scatter_tensor"])
    p.add_argument("-b", default="1M")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=10)
    p.add_argument("-w", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(1)
    rank, size = ddl_torch.launch_rank_and_size()
    store = f"/tmp/ddl-torch-bench-{os.getppid()}"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    groups = {"ddl": dist.new_group(backend="ddl"), "gloo": dist.new_group(backend="gloo")}
    world = dist.group.WORLD
    c = a.collective
    if rank == 0:
        how = {"all_reduce": "sum, in place", "reduce": "sum, root 0", "all_gather": "into a list",
               "all_to_all": "all_to_all_single, equal parts, out of place",
               "sendrecv": "isend to the next rank, irecv from the previous",
               "all_gather_into_tensor": "each rank's part, into one tensor",
               "reduce_scatter_tensor": "sum, the size is the input"}.get(c, "root 0")
        print(f"# torch.distributed {c} ({how}, float32), {size} ranks, median of {a.n}, "
              f"slowest rank; torch {torch.__version__}")
        print(f"{'size':>8} {'ddl (ms)':>10} {'ddl GB/s':>9} {'gloo (ms)':>10} {'gloo GB/s':>10} {'gloo/ddl':>9}")
    size_b = parse_bytes(a.b)
    most = parse_bytes(a.e) // 4
    buf = torch.ones(most)  # allocated once, reused at every size (fresh pages are slow here)
    many = [torch.zeros(most) for _ in range(size)] if c in ("gather", "scatter", "all_gather") else []
    many = [torch.zeros(most)] if c in ("all_to_all", "sendrecv") else many  # the all-to-all's output, the receive
    # all_gather_into_tensor: the size is each rank's part, the output holds them all;
    # reduce_scatter_tensor: the size is the input, each rank's output a 1/size part
    many = [torch.zeros(most * size)] if c == "all_gather_into_tensor" else many
    many = [torch.zeros(most)] if c == "reduce_scatter_tensor" else many
    unsupported = set()
    while size_b <= parse_bytes(a.e):
        n = size_b // 4 // size * size if c in ("all_to_all", "reduce_scatter_tensor") else size_b // 4
        t, parts = buf[:n], [m[:n] for m in many]
        if c == "all_gather_into_tensor":
            parts = [many[0][: n * size]]
        elif c == "reduce_scatter_tensor":
            parts = [many[0][: n // size]]

        def fill():  # the inputs; the outputs hold something else
            if c == "sendrecv":
                t.fill_(float(rank + 1))
                parts[0].fill_(-1.0)
                return
            if c == "all_to_all":  # part k for rank k: rank * size + k + 1
                t.view(size, -1).copy_(torch.arange(size).float().add_(rank * size + 1).view(size, 1))
                parts[0].fill_(-1.0)
                return
            if c in ("all_gather_into_tensor", "reduce_scatter_tensor"):
                t.fill_(float(rank + 1))
                parts[0].fill_(-1.0)
                return
            t.fill_(float(rank + 1) if c != "scatter" else -1.0)
            if c == "scatter" and rank == 0:
                for i, q in enumerate(parts):
                    q.fill_(float(i + 1))
            elif parts:
                for q in parts:
                    q.fill_(-1.0)

        def call(g):
            if c == "all_reduce":
                dist.all_reduce(t, group=g)
            elif c == "broadcast":
                dist.broadcast(t, src=0, group=g)
            elif c == "reduce":
                dist.reduce(t, dst=0, group=g)
            elif c == "gather":
                dist.gather(t, parts if rank == 0 else None, dst=0, group=g)
            elif c == "scatter":
                dist.scatter(t, parts if rank == 0 else None, src=0, group=g)
            elif c == "all_to_all":
                dist.all_to_all_single(parts[0], t, group=g)
            elif c == "all_gather_into_tensor":
                dist.all_gather_into_tensor(parts[0], t, group=g)
            elif c == "reduce_scatter_tensor":
                dist.reduce_scatter_tensor(parts[0], t, group=g)
            elif c == "sendrecv":
                got = dist.irecv(parts[0], src=(rank + size - 1) % size, group=g)
                dist.isend(t, dst=(rank + 1) % size, group=g).wait()
                got.wait()
            else:
                dist.all_gather(parts, t, group=g)

        def right():
            if c == "all_reduce" or (c == "reduce" and rank == 0):
                return bool(torch.all(t == size * (size + 1) / 2))
            if c == "broadcast":
                return bool(torch.all(t == 1.0))
            if c == "scatter":
                return bool(torch.all(t == float(rank + 1)))
            if c == "all_to_all":  # part j from rank j: j * size + rank + 1
                want = torch.arange(size).float().mul_(size).add_(rank + 1).view(size, 1)
                return bool(torch.all(parts[0].view(size, -1) == want))
            if c == "all_gather_into_tensor":
                return all(bool(torch.all(q == float(i + 1))) for i, q in enumerate(parts[0].view(size, -1)))
            if c == "reduce_scatter_tensor":
                return bool(torch.all(parts[0] == size * (size + 1) / 2))
            if c == "sendrecv":  # the previous rank's
                return bool(torch.all(parts[0] == float((rank + size - 1) % size + 1)))
            if c == "all_gather" or (c == "gather" and rank == 0):
                return all(bool(torch.all(q == float(i + 1))) for i, q in enumerate(parts))
            return True

        times = {}
        for name, g in groups.items():
            samples = []
            if name == "gloo" and c in unsupported:
                times[name] = float("nan")
                continue
            for i in range(a.w + a.n):
                fill()
                dist.barrier(group=world)
                t0 = time.perf_counter()
                try:
                    call(g)
                except RuntimeError as e:  # gloo lacks some tensor forms (on every rank alike)
                    if name != "gloo":
                        raise
                    unsupported.add(c)
                    if rank == 0:
                        print(f"# gloo: {c} not supported ({str(e).splitlines()[0]})")
                    break
                dt = torch.tensor([time.perf_counter() - t0])
                dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=world)
                if i >= a.w:
                    samples.append(float(dt))
            if c in unsupported and name == "gloo":
                times[name] = float("nan")
                continue
            if not right():
                sys.exit(f"{name}: wrong {c} result at {size_b} bytes")
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
