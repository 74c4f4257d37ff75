"""One process told it is rank 1 of 2, with no rank 0 anywhere, must fail
clearly and soon, not wait for ever:
  test_launch.py mpi  -- over MPI (DDL_TORCH_TRANSPORT=mpi) without mpiexec:
                         at once, naming the launch to use;
  test_launch.py ucx  -- over UCX: at the timeout given to init_process_group
                         (3 s here), naming the missing rank.
Prints "torch launch: ok" and exits 0 when the error is right."""
import datetime
import os
import sys
import tempfile
import time

import torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "mpi"
os.environ["DDL_TORCH_TRANSPORT"] = mode
os.environ.pop("DDL_TIMEOUT", None)  # the group's timeout is what is tested
import ddl_torch  # noqa: E402,F401  (registers "ddl")

with tempfile.TemporaryDirectory(prefix="ddl-torch-launch-") as d:
    start = time.monotonic()
    try:
        dist.init_process_group("ddl", init_method=f"file://{os.path.join(d, 'store')}", rank=1, world_size=2,
                                timeout=datetime.timedelta(seconds=3))
    except RuntimeError as e:
        took = time.monotonic() - start
        if mode == "mpi":
            ok = "MPI job of 1" in str(e) and "mpiexec -n 2" in str(e)
        else:
            ok = "rank 0" in str(e) and 2.5 < took < 30
        print(f"torch launch: {'ok' if ok else 'wrong error'} ({mode}, {took:.1f} s): {e}")
        sys.exit(0 if ok else 1)
print(f"torch launch: no error for a group of 2 with one process ({mode})")
sys.exit(1)
