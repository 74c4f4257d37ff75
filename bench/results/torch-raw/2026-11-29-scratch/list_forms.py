"""torch.distributed's list forms (all_gather into a list of tensors,
reduce_scatter from a list) against the flat forms (all_gather_into_tensor,
reduce_scatter_tensor) on the "ddl" backend, and gloo's all_gather beside
them (gloo has no flat all-gather and no reduce-scatter in torch 1.13).
float32, in-process timing of one call between two gloo barriers, median of
6 after 2 warm-ups, ms. Run under mpiexec; prints on rank 0."""
import os
import time

import torch
import torch.distributed as dist

import ddl_torch

rank, size = ddl_torch.mpi_rank_and_size()
store = f"/tmp/ddl-list-forms-{os.getppid()}"
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
ddl = dist.new_group(backend="ddl")
gl = dist.new_group(backend="gloo")


def median_ms(call):
    ts = []
    for i in range(8):
        dist.barrier(group=gl)
        t0 = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t0)
    ts = sorted(ts[2:])
    return ts[len(ts) // 2] * 1e3


if rank == 0:
    print(f"# {size} ranks; MiB = each rank's part; ms a call")
    print("# MiB  ddl_all_gather_list  ddl_all_gather_into_tensor  gloo_all_gather_list  ddl_reduce_scatter_list  ddl_reduce_scatter_tensor")
for mib in (1, 4, 16, 64):
    n = mib << 18
    x = torch.full((n,), float(rank))
    outs = [torch.empty(n) for _ in range(size)]
    flat = torch.empty(n * size)
    parts = [torch.full((n,), float(rank + i)) for i in range(size)]
    packed = torch.cat(parts)
    out = torch.empty(n)
    r = [median_ms(lambda: dist.all_gather(outs, x, group=ddl)),
         median_ms(lambda: dist.all_gather_into_tensor(flat, x, group=ddl)),
         median_ms(lambda: dist.all_gather(outs, x, group=gl)),
         median_ms(lambda: dist.reduce_scatter(out, parts, group=ddl)),
         median_ms(lambda: dist.reduce_scatter_tensor(out, packed, group=ddl))]
    if rank == 0:
        print(f"{mib:5d}" + "".join(f"  {v:10.2f}" for v in r), flush=True)
dist.barrier(group=gl)
dist.destroy_process_group()
if rank == 0 and os.path.exists(store):
    os.remove(store)
