"""A group that cannot form must fail clearly and soon on every process, not
wait for ever:
  test_launch.py mpi   -- one process told it is rank 1 of 2, over MPI
                          (DDL_TORCH_TRANSPORT=mpi) without mpiexec: at once,
                          naming the launch to use;
  test_launch.py ucx   -- the same over UCX: at the timeout given to
                          init_process_group (3 s here), naming the missing rank;
  test_launch.py size  -- two processes over UCX that disagree on the world
                          size (2 and 3): both at once, naming both sizes.
Prints "torch launch: ok" and exits 0 when the errors are right."""
import datetime
import os
import sys
import tempfile
import time

import torch.distributed as dist
import torch.multiprocessing as mp

mode = sys.argv[1] if len(sys.argv) > 1 else "mpi"
os.environ["DDL_TORCH_TRANSPORT"] = "ucx" if mode == "size" else mode
os.environ.pop("DDL_TIMEOUT", None)  # the group's timeout is what is tested
import ddl_torch  # noqa: E402,F401  (registers "ddl")


def join(store, rank, size, seconds):
    """init_process_group's error and how long it took (None: no error)."""
    start = time.monotonic()
    try:
        dist.init_process_group("ddl", init_method=f"file://{store}", rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=seconds))
    except RuntimeError as e:
        return str(e), time.monotonic() - start
    return None, time.monotonic() - start


def disagreeing(rank, store, out):  # a spawned process: rank 0 says 2 ranks, rank 1 says 3
    out.put((rank,) + join(store, rank, 2 + rank, 20))


def main():
    with tempfile.TemporaryDirectory(prefix="ddl-torch-launch-") as d:
        store = os.path.join(d, "store")
        if mode == "size":
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            procs = [ctx.Process(target=disagreeing, args=(r, store, out)) for r in range(2)]
            for p in procs:
                p.start()
            got = sorted(out.get(timeout=60) for _ in procs)
            for p in procs:
                p.join()
            ok = all(e and "disagree on the world size" in e and "says 2" in e and "says 3" in e and took < 10
                     for _, e, took in got)
            for r, e, took in got:
                print(f"rank {r} ({took:.1f} s): {e}")
            print(f"torch launch: {'ok' if ok else 'wrong error'} (size)")
            sys.exit(0 if ok else 1)
        e, took = join(store, 1, 2, 3)
        if e is None:
            print(f"torch launch: no error for a group of 2 with one process ({mode})")
            sys.exit(1)
        if mode == "mpi":
            ok = "MPI job of 1" in e and "mpiexec -n 2" in e
        else:
            ok = "rank 0" in e and 2.5 < took < 30
        print(f"torch launch: {'ok' if ok else 'wrong error'} ({mode}, {took:.1f} s): {e}")
        sys.exit(0 if ok else 1)


if __name__ == "__main__":  # (spawn imports this file again in its processes)
    main()
