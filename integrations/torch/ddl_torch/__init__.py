"""ddl as a torch.distributed backend.

    import ddl_torch                      # registers the backend "ddl"
    torch.distributed.init_process_group("ddl", rank=rank, world_size=size, init_method=...)
    model = torch.nn.parallel.DistributedDataParallel(model)

Launch as you like: torch.multiprocessing.spawn, torchrun (torch 2.x), srun,
`ddl-run -n N python train.py`, or `mpiexec -n N python train.py`. Under an
MPI launcher a group runs over MPI; otherwise over UCX, its members meeting
through the store torch gives the backend (any init_method: env://, tcp://,
file://). `DDL_TORCH_TRANSPORT=mpi|ucx` forces one; `ddl_torch.transport()`
says which. `launch_rank_and_size()` reads the rank and size a launcher
gives (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE). Torch's
ranks need not be MPI's, and `new_group(ranks=[...], backend="ddl")` works
over any subset. A group's deadline is DDL_TIMEOUT where set, else the
timeout given to init_process_group or new_group.
Supported: all_reduce (SUM, AVG, PRODUCT, MIN, MAX) and all_reduce_coalesced, broadcast,
all_gather and _allgather_base, reduce_scatter and _reduce_scatter_base,
all_to_all and all_to_all_single, send and recv, barrier, and reduce,
gather and scatter, on contiguous CPU tensors of float32, float64, float16,
bfloat16, int32 and int64, and of any dtype for the calls that only move data
(broadcast, the gathers, scatter, all_to_all, send and recv; so the object
collectives work); asynchronous work objects with futures (what DDP uses).
Anything else raises RuntimeError naming the call.
"""
import inspect
import os

import torch  # noqa: F401  (libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["launch_rank_and_size", "mpi_rank_and_size", "transport"]


def launch_rank_and_size():
    """(rank, world size) from the launcher's environment: torchrun's and
    ddl-run's RANK/WORLD_SIZE, Open MPI's, or MPICH's; (0, 1) with none."""
    for r, s in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if r in os.environ and s in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    return 0, 1


def mpi_rank_and_size():
    """(rank, world size) from the MPI launcher's environment; (0, 1) outside mpiexec."""
    for r, s in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if r in os.environ and s in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    return 0, 1


def transport():
    """'mpi' or 'ucx': what this process's "ddl" groups run over."""
    return _C.transport()


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


if not hasattr(dist.Backend, "DDL"):
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        # torch 2.x: ddl serves CPU tensors, so init_process_group("cpu:ddl,cuda:nccl") works
        dist.Backend.register_backend("ddl", _create, devices=["cpu"])
    else:
        dist.Backend.register_backend("ddl", _create)
