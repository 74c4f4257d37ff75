"""The "ddl" backend in processes torch.multiprocessing.spawn starts (no
mpiexec, no ddl-run): they meet through torch's TCP store (tcp://) and run
over UCX. Collectives on every rank against what each rank can compute, a
subgroup of the even ranks, the object collectives, and a few DDP steps
whose parameters must agree on every rank.
  test_spawn.py [N]   (default 3) prints "torch spawn: F failed on N ranks over T"."""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, size, port, results):
    import ddl_torch  # registers "ddl" in this process

    failures = []

    def check(name, ok):
        if not ok:
            failures.append(name)

    dist.init_process_group("ddl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
    for dtype in (torch.float32, torch.float64, torch.int64, torch.bfloat16):
        for n in (0, 1, 7, 100003):
            x = torch.full((n,), rank + 1, dtype=dtype)
            dist.all_reduce(x)
            check(f"all_reduce {dtype} n={n}", torch.equal(x, torch.full((n,), size * (size + 1) // 2, dtype=dtype)))
    parts = [torch.zeros(5, dtype=torch.int32) for _ in range(size)]
    dist.all_gather(parts, torch.arange(5, dtype=torch.int32) + 10 * rank)
    check("all_gather", all(torch.equal(p, torch.arange(5, dtype=torch.int32) + 10 * q) for q, p in enumerate(parts)))
    out = torch.zeros(4 * size)
    dist.all_gather_into_tensor(out, torch.full((4,), float(rank))) if hasattr(dist, "all_gather_into_tensor") \
        else dist._all_gather_base(out, torch.full((4,), float(rank)))
    check("all_gather into one tensor", torch.equal(out, torch.arange(size).repeat_interleave(4).float()))
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": f"worker-{rank}"})
    check("all_gather_object", objs == [{"rank": q, "name": f"worker-{q}"} for q in range(size)])
    msg = [f"from {size - 1}", 42] if rank == size - 1 else [None, None]
    dist.broadcast_object_list(msg, src=size - 1)
    check("broadcast_object_list", msg == [f"from {size - 1}", 42])
    # A subgroup of the even ranks (every rank calls new_group; members use it).
    evens = list(range(0, size, 2))
    sub = dist.new_group(ranks=evens, backend="ddl")
    if rank in evens:
        y = torch.tensor([float(rank)])
        dist.all_reduce(y, group=sub)
        check("subgroup all_reduce", y.item() == float(sum(evens)))
    # DDP: the same model everywhere after a few steps on different data.
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 16, generator=g)).square().mean().backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(every, flat)
    check("DDP parameters agree", all(torch.equal(e, every[0]) for e in every))
    dist.barrier()
    results.put((rank, failures, ddl_torch.transport()))
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(worker, args=(size, free_port(), results), nprocs=size, join=True)
    failed, transport = [], "?"
    for _ in range(size):
        rank, fails, transport = results.get()
        failed += [f"rank {rank}: {f}" for f in fails]
    for f in failed:
        print("FAILED", f)
    print(f"torch spawn: {len(failed)} failed on {size} ranks over {transport}")
    sys.exit(1 if failed else 0)
