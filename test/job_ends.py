#!/usr/bin/env python3
"""Runs an MPI job in which one rank dies on purpose and checks that the job
ends soon after, never hangs (issue 20: "a rank exits / is killed: ... the
job ends").

usage: job_ends.py LIMIT_S [--survivors-name N] [--survivor-says TEXT] COMMAND...

With --survivors-name N, also requires N survivors' errors, each naming the
dead rank as exited ("rank R (pid P on HOST) has exited", seen from its
process) or as one that reported no timeout (a launcher that keeps the job
running, so the survivors' own errors surface). With --survivor-says TEXT,
also requires TEXT in at least one survivor's error.

The dying rank prints "ddl test: rank R dies (HOW) at T" (T: seconds since
the epoch) just before it goes. Passes when that line is there, the job
ended within LIMIT_S of T. Prints how long the job took to end, what the
survivors said and whether the output names rank R (Open MPI's launcher
does; MPICH's hydra ends the job at once with the dead rank's exit code and
says nothing).
"""
import re
import subprocess
import sys
import time


def main():
    limit = float(sys.argv[1])
    cmd = sys.argv[2:]
    must_name = 0
    must_say = None
    while cmd[:1] in (["--survivors-name"], ["--survivor-says"]):
        if cmd[0] == "--survivors-name":
            must_name = int(cmd[1])
        else:
            must_say = cmd[1]
        cmd = cmd[2:]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        print((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))
        print("job_ends: FAILED: the job did not end within 120 s")
        return 1
    ended = time.time()
    out = p.stdout
    print(out)
    m = re.search(r"ddl test: rank (\d+) dies \(([^)]+)\) at ([0-9.]+)", out)
    if not m:
        print("job_ends: FAILED: no rank said it was dying (was the test case run?)")
        return 1
    rank, how, at = int(m.group(1)), m.group(2), float(m.group(3))
    took = ended - at
    survivors = re.findall(r"ddl test: rank (\d+) got: (.*)", out)
    for r, what in survivors:
        print(f"job_ends: survivor rank {r} got: {what}")
    others = "\n".join(l for l in out.splitlines() if "ddl test: rank" not in l or " got: " in l)
    # Open MPI: "process rank 2 ... exited on signal 9" or "Process name: [[...],2]";
    # MPICH: "RANK 2 PID ... KILLED BY SIGNAL: 9" / "rank 2 in job ... exit status"
    named = re.search(rf"rank {rank}\b|,{rank}\]|failed: .*\b{rank}\b", others, re.I)
    print(f"job_ends: rank {rank} died ({how}); the job ended {took:.2f} s later "
          f"(exit code {p.returncode}); its death is {'named' if named else 'NOT named'} in the output")
    if took > limit:
        print(f"job_ends: FAILED: more than {limit} s")
        return 1
    if must_name:
        naming = [r for r, what in survivors
                  if f"no timeout reported by rank {rank}" in what
                  or re.search(rf"rank {rank} \(pid \d+ on [^)]*\) has exited", what)]
        if len(naming) < must_name:
            print(f"job_ends: FAILED: {len(naming)} survivor(s) named rank {rank}, {must_name} expected")
            return 1
        print(f"job_ends: {len(naming)} survivors named rank {rank}")
    if must_say is not None:
        if not any(must_say in what for r, what in survivors):
            print(f"job_ends: FAILED: no survivor's error says '{must_say}'")
            return 1
        print(f"job_ends: a survivor's error says '{must_say}'")
    print("job_ends: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
