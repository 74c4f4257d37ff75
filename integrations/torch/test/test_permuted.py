"""A "ddl" default group whose torch ranks are not MPI's (torch rank = the
reverse of the MPI rank): results must follow torch's ranks (a broadcast's
root, the order of gathered parts, which block a reduce_scatter leaves).
Run under mpiexec (-n 3). Prints "torch permuted: N failed" on torch rank 0."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist

import ddl_torch

mpi_rank, size = ddl_torch.mpi_rank_and_size()
rank = size - 1 - mpi_rank
store = f"{tempfile.gettempdir()}/ddl-torch-permuted-{os.getppid()}"  # one store per mpiexec job
dist.init_process_group("ddl", init_method=f"file://{store}", rank=rank, world_size=size)
failures = []
check = lambda name, ok: ok or failures.append(name)  # noqa: E731

check("rank and size", dist.get_rank() == rank and dist.get_world_size() == size)
for n in (1, 1000, 65537):
    x = torch.full((n,), float(rank + 1))
    dist.all_reduce(x)
    check(f"all_reduce n={n}", torch.equal(x, torch.full((n,), size * (size + 1) / 2)))
    for root in range(size):
        x = torch.full((n,), float(mpi_rank)) if rank == root else torch.zeros(n)
        dist.broadcast(x, src=root)
        check(f"broadcast root {root} n={n}", torch.equal(x, torch.full((n,), float(size - 1 - root))))
    parts = [torch.zeros(n) for _ in range(size)]
    dist.all_gather(parts, torch.full((n,), float(rank)))
    check(f"all_gather n={n}", all(torch.equal(p, torch.full((n,), float(i))) for i, p in enumerate(parts)))
    out = torch.zeros(n)
    dist.reduce_scatter_tensor(out, torch.cat([torch.full((n,), float(i * 10 + rank)) for i in range(size)]))
    check(f"reduce_scatter n={n}", torch.equal(out, torch.full((n,), float(rank * 10 * size + size * (size - 1) / 2))))

total = torch.tensor([len(failures)])
dist.all_reduce(total)
for f in failures:
    print(f"torch rank {rank}: FAILED {f}", file=sys.stderr)
if rank == 0:
    print(f"torch permuted: {int(total)} failed on {size} ranks")
dist.barrier()
dist.destroy_process_group()
if rank == 0 and os.path.exists(store):
    os.remove(store)
sys.exit(1 if int(total) else 0)
