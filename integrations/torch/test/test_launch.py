"""A "ddl" group of more ranks than the MPI job has (here: one process
started without mpiexec, told it is rank 1 of 2) must raise at once, naming
the launch to use, not wait for ranks that will never come."""
import os
import sys
import tempfile

import torch.distributed as dist

import ddl_torch  # noqa: F401  (registers "ddl")

with tempfile.TemporaryDirectory(prefix="ddl-torch-launch-") as d:
    try:
        dist.init_process_group("ddl", init_method=f"file://{os.path.join(d, 'store')}", rank=1, world_size=2)
    except RuntimeError as e:
        ok = "MPI job of 1" in str(e) and "mpiexec -n 2" in str(e)
        print(f"torch launch: {'ok' if ok else 'wrong message'}: {e}")
        sys.exit(0 if ok else 1)
print("torch launch: no error for a group larger than the MPI job")
sys.exit(1)
