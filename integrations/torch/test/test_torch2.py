"""What torch 2.x reaches only through a registered c10d Backend, on the
"ddl" backend: the device-mapped init ("cpu:ddl"), all_gather_into_tensor and
reduce_scatter_tensor, their coalesced forms (FSDP's), the functional
collectives, monitored_barrier, DDP with static_graph and a compression
hook, and FSDP2 (fully_shard) on CPU; each checked against what every rank can compute.
Run under ddl-run (-n 2, -n 3) or mpiexec with torch >= 2.1.
Prints "torch2: N failed on R ranks over T" on rank 0."""
import os
import sys

import torch
import torch.distributed as dist

import ddl_torch

if int(torch.__version__.split(".")[0]) < 2:
    print(f"torch2: skipped (torch {torch.__version__})")
    sys.exit(77)

rank, size = ddl_torch.launch_rank_and_size()
store = f"/tmp/ddl-torch2-{os.getppid()}"
dist.init_process_group("cpu:ddl", init_method=f"file://{store}", rank=rank, world_size=size)
failures = []


def check(name, ok):
    if not ok:
        failures.append(name)


check("the default group's cpu backend is ddl", dist.get_backend() in ("ddl", "cpu:ddl"))
for dtype in (torch.float32, torch.bfloat16, torch.int64):
    for n in (1, 5, 4099):
        out = torch.zeros(size * n, dtype=dtype)
        dist.all_gather_into_tensor(out, torch.full((n,), rank + 1, dtype=dtype))
        want = torch.arange(1, size + 1, dtype=dtype).repeat_interleave(n)
        check(f"all_gather_into_tensor {dtype} n={n}", torch.equal(out, want))
        # small integers: exact in every dtype, whatever the order of the sum
        inp = (torch.arange(size * n, dtype=torch.int64) % 32 + rank).to(dtype)
        red = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(red, inp)
        base = torch.arange(rank * n, (rank + 1) * n, dtype=torch.int64) % 32
        check(f"reduce_scatter_tensor {dtype} n={n}", torch.equal(red, (base * size + size * (size - 1) // 2).to(dtype)))
# The coalesced forms, as FSDP issues them.
ins = [torch.full((3,), float(rank)), torch.full((7,), float(10 * rank))]
outs = [torch.zeros(3 * size), torch.zeros(7 * size)]
with dist._coalescing_manager(async_ops=False):
    for o, i in zip(outs, ins):
        dist.all_gather_into_tensor(o, i)
check("coalesced all_gather_into_tensor",
      torch.equal(outs[0], torch.arange(size).float().repeat_interleave(3)) and
      torch.equal(outs[1], (10 * torch.arange(size)).float().repeat_interleave(7)))
big = [torch.ones(2 * size) * (rank + 1), torch.ones(5 * size)]
small = [torch.zeros(2), torch.zeros(5)]
with dist._coalescing_manager(async_ops=False):
    for o, i in zip(small, big):
        dist.reduce_scatter_tensor(o, i)
check("coalesced reduce_scatter_tensor",
      torch.equal(small[0], torch.full((2,), float(size * (size + 1) // 2))) and torch.equal(small[1], torch.full((5,), float(size))))
# The functional collectives (DTensor's path).
import torch.distributed._functional_collectives as fc  # noqa: E402

y = fc.all_reduce(torch.full((4,), float(rank)), "sum", dist.group.WORLD)
check("functional all_reduce", torch.equal(y, torch.full((4,), float(size * (size - 1) // 2))))
dist.monitored_barrier()
# new_subgroups_by_enumeration: the even ranks and the odd ones, each a "ddl" group.
evens, odds = list(range(0, size, 2)), list(range(1, size, 2))
cur, _ = dist.new_subgroups_by_enumeration([evens, odds], backend="ddl")
z = torch.tensor([float(rank)])
dist.all_reduce(z, group=cur)
check("new_subgroups_by_enumeration", z.item() == float(sum(evens if rank % 2 == 0 else odds)))
# DDP: static graph and the fp16 compression hook; the same parameters everywhere.
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4), static_graph=True)
model.register_comm_hook(None, default_hooks.fp16_compress_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 16, generator=g)).square().mean().backward()
    opt.step()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every = torch.zeros(size * flat.numel())
dist.all_gather_into_tensor(every, flat)
check("DDP (static graph, fp16 hook) parameters agree", all(torch.equal(c, flat) for c in every.chunk(size)))
# FSDP2 (fully_shard) on CPU: sharded parameters over a device mesh of the
# default group, the same loss on every rank's same batch. (FSDP1 needs an
# accelerator in torch 2.x.)
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
mesh = init_device_mesh("cpu", (size,))
for layer in (net[0], net[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(net, mesh=mesh)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
x = torch.randn(16, 32, generator=torch.Generator().manual_seed(7))
losses = []
for _ in range(3):
    opt.zero_grad()
    loss = net(x).square().mean()
    loss.backward()
    opt.step()
    losses.append(loss.detach())
lt = torch.stack(losses)
all_l = torch.zeros(size * lt.numel())
dist.all_gather_into_tensor(all_l, lt)
check("FSDP2 losses agree and fall", all(torch.equal(c, lt) for c in all_l.chunk(size)) and losses[-1] < losses[0])

total = torch.tensor([len(failures)])
dist.all_reduce(total)
for f in failures:
    print(f"rank {rank} FAILED {f}")
if rank == 0:
    print(f"torch2: {int(total)} failed on {size} ranks over {ddl_torch.transport()} (torch {torch.__version__})")
dist.destroy_process_group()
sys.exit(1 if int(total) else 0)
