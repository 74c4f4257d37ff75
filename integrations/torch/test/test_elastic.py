"""Elastic training on the "ddl" backend under torchrun (torch 2.x).

    test_elastic.py check     runs torchrun twice (3 workers, --max-restarts=1): once
                              undisturbed, once with worker 2 killed (SIGKILL) at step 6
                              of its first attempt; the survivors must leave their
                              collective (ddl names the dead rank) so the agent restarts
                              the group, which resumes from its last checkpoint. Both runs
                              must end with the same parameters. Prints
                              "torch elastic: restarted and resumed, parameters agree".
    test_elastic.py train DIR KILL   one worker (what torchrun starts)."""
import os
import signal
import subprocess
import sys
import tempfile

STEPS = 12


def train(ckpt_dir, kill):
    import torch
    import torch.distributed as dist

    import ddl_torch  # noqa: F401  (registers "ddl")

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("ddl", init_method="env://")
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ckpt = os.path.join(ckpt_dir, "ckpt.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    for step in range(start, STEPS):
        if kill and attempt == 0 and rank == 2 and step == 6:
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(1000 * step + rank)
        opt.zero_grad()
        model(torch.randn(16, 32, generator=g)).square().mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0:  # the checkpoint of the steps every rank has finished
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        dist.barrier()
    if rank == 0:
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        torch.save(flat, os.path.join(ckpt_dir, "final.pt"))
        print(f"elastic: rank 0 finished {STEPS} steps on attempt {attempt} (resumed at step {start})", flush=True)
    dist.destroy_process_group()


def run(kill):
    d = tempfile.mkdtemp(prefix="ddl-elastic-")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", "--max-restarts=1",
           "--monitor-interval=0.2", __file__, "train", d, "1" if kill else "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stdout.write(out.stderr[-4000:])
        raise SystemExit(f"torch elastic: torchrun ended with {out.returncode}")
    return d, out.stdout + out.stderr


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3] == "1")
        sys.exit(0)
    import torch

    if int(torch.__version__.split(".")[0]) < 2:
        print(f"torch elastic: skipped (torchrun needs torch 2.x here, not {torch.__version__})")
        sys.exit(77)
    os.environ.pop("DDL_TORCH_TRANSPORT", None)
    calm, _ = run(False)
    hit, log = run(True)
    a, b = torch.load(os.path.join(calm, "final.pt")), torch.load(os.path.join(hit, "final.pt"))
    restarted = "on attempt 1" in log
    named = "rank 2" in log
    print(f"restarted: {restarted}; the dead rank named in a survivor's error: {named}")
    if restarted and torch.equal(a, b):
        print("torch elastic: restarted and resumed, parameters agree")
        sys.exit(0)
    print(f"torch elastic: FAILED (restarted {restarted}, equal {torch.equal(a, b)})")
    sys.exit(1)
