"""ddl as a torch.distributed backend.

    import ddl_torch                      # registers the backend "ddl"
    torch.distributed.init_process_group("ddl", rank=rank, world_size=size, init_method=...)
    model = torch.nn.parallel.DistributedDataParallel(model)

ddl runs its collectives over MPI: launch with `mpiexec -n N python train.py`
(`ddl_torch.mpi_rank_and_size()` reads the rank and size MPI's launcher gives:
OMPI_COMM_WORLD_RANK/SIZE under Open MPI, PMI_RANK/SIZE under MPICH). Torch's
ranks need not be MPI's, and `new_group(ranks=[...], backend="ddl")` works
over any subset: a group finds its members' MPI ranks through its store.
Supported: all_reduce (SUM, AVG, PRODUCT, MIN, MAX) and all_reduce_coalesced, broadcast,
all_gather and _allgather_base, reduce_scatter and _reduce_scatter_base,
barrier, and reduce, gather and scatter (through an all_reduce, an all_gather
and a broadcast), on contiguous CPU tensors of float32, float64, float16, bfloat16,
int32 and int64, and of any dtype for the calls that only move data (broadcast,
the gathers, scatter; so all_gather_object, broadcast_object_list, gather_object
and scatter_object_list work); asynchronous work objects with futures (what DDP uses).
Anything else raises RuntimeError naming the call.
"""
import os

import torch  # noqa: F401  (libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["mpi_rank_and_size"]


def mpi_rank_and_size():
    """(rank, world size) from the MPI launcher's environment; (0, 1) outside mpiexec."""
    for r, s in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if r in os.environ and s in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    return 0, 1


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


if not hasattr(dist.Backend, "DDL"):
    dist.Backend.register_backend("ddl", _create)
