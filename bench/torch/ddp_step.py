"""One DDP training step of a wide MLP (reduction-bound: ~38 MB of float32
gradients against a few ms of compute), through "ddl" and through gloo in the
same job, alternating; median step time of the slowest rank.

    torchrun --standalone --nproc-per-node=4 bench/torch/ddp_step.py [--steps 20] [--width 4096]
    mpiexec -n 4 python3 bench/torch/ddp_step.py     ddl-run -n 4 python3 bench/torch/ddp_step.py
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import ddl_torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args()
    torch.set_num_threads(1)
    rank, size = ddl_torch.launch_rank_and_size()
    store = f"/tmp/ddl-torch-ddp-step-{os.getppid()}"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    groups = {"ddl": dist.new_group(backend="ddl"), "gloo": dist.new_group(backend="gloo")}
    models, opts = {}, {}
    for name, g in groups.items():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(784, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 1536),
                                  torch.nn.ReLU(), torch.nn.Linear(1536, 10))
        models[name] = torch.nn.parallel.DistributedDataParallel(net, process_group=g)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=0.01)
    grad_mb = sum(p.numel() for p in models["ddl"].parameters()) * 4 / 1e6
    gen = torch.Generator().manual_seed(rank)
    x, y = torch.randn(a.batch, 784, generator=gen), torch.randint(0, 10, (a.batch,), generator=gen)
    times = {n: [] for n in groups}
    for step in range(a.warmup + a.steps):
        for name in groups:
            dist.barrier()
            t0 = time.perf_counter()
            opts[name].zero_grad()
            torch.nn.functional.cross_entropy(models[name](x), y).backward()
            opts[name].step()
            dt = torch.tensor([time.perf_counter() - t0])
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            if step >= a.warmup:
                times[name].append(float(dt))
    same = all(torch.equal(p, q) for p, q in zip(models["ddl"].parameters(), models["gloo"].parameters()))
    if rank == 0:
        d, g = statistics.median(times["ddl"]), statistics.median(times["gloo"])
        print(f"# DDP step, MLP 784-{a.width}-1536-10 ({grad_mb:.1f} MB of gradients), batch {a.batch}, {size} ranks, "
              f"median of {a.steps}, slowest rank; torch {torch.__version__}, ddl over {ddl_torch.transport()}")
        print(f"ddl {1e3 * d:.1f} ms, gloo {1e3 * g:.1f} ms, ddl/gloo {d / g:.2f}; parameters after the same steps "
              f"{'identical' if same else 'differ (float rounding of the reduction order)'}")
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(store):
        os.remove(store)


if __name__ == "__main__":
    main()
