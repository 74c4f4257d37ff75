"""`pip install --no-build-isolation ./integrations/torch` builds ddl_torch
against this environment's torch (setup.py); the package it installs (here
into a fresh directory, --target) registers "ddl" on import and runs
test_spawn.py's collectives, subgroup and DDP on 2 processes.
Prints "torch pip: ok" when both work."""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
source = os.path.dirname(here)
with tempfile.TemporaryDirectory(prefix="ddl-torch-pip-") as target:
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                          "--target", target, source], capture_output=True, text=True)
    if pip.returncode != 0:
        print(pip.stdout[-3000:], pip.stderr[-3000:])
        raise SystemExit("torch pip: pip install failed")
    env = dict(os.environ, PYTHONPATH=target)
    # from a directory of no package: python -c puts the working directory first on its path
    run = subprocess.run([sys.executable, os.path.join(here, "test_spawn.py"), "2"], env=env, capture_output=True,
                         text=True, timeout=240, cwd=target)
    print(run.stdout[-2000:], run.stderr[-2000:] if run.returncode else "")
    where = subprocess.run([sys.executable, "-c", "import ddl_torch; print(ddl_torch.__file__)"], env=env,
                           capture_output=True, text=True, cwd=target).stdout.strip()
    ok = run.returncode == 0 and where.startswith(target)
    print(f"torch pip: {'ok' if ok else 'FAILED'} (ddl_torch from {where})")
    sys.exit(0 if ok else 1)
