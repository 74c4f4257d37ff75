"""Reading ddl-bench's table output (shared by the summary scripts here)."""


def take(argv, flag, default=None):
    """Removes `flag VALUE` from argv (a list, changed in place); VALUE, or default."""
    if flag not in argv:
        return default
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


def placement(argv):
    """Removes `--placement oop|ip` from a copy of argv; True when in-place was asked for."""
    argv = list(argv)
    return take(argv, "--placement") == "ip", argv


def rows(path):
    """(size, impl, out-of-place us or None, in-place us, line) for every
    measured row (None: no out-of-place form, e.g. Gloo or a broadcast)."""
    for line in open(path):
        f = line.split()
        if len(f) < 11 or not f[0].isdigit() or f[4] == "floor:copy":
            continue
        yield int(f[0]), f[4], None if f[5] == "-" else float(f[5]), float(f[10]), line


def times(path):
    """{(size, impl): (out-of-place us or None, in-place us)} of one run."""
    out = {}
    for size, impl, oop, ip, _ in rows(path):
        out[(size, impl)] = (oop, ip)
    return out


def floor_times(path):
    """{size: floor:copy us} of one run (the same ranks copying their own buffer)."""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 6 and f[0].isdigit() and f[4] == "floor:copy":
            out[int(f[0])] = float(f[5])
    return out


def median_range(v, digits=1):
    """'median (min-max)' of the values v, or '-' when there are none."""
    import statistics
    return f"{statistics.median(v):.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})" if v else "-"


def provenance(files, command):
    """The line a report puts above a table (`ctest -R docs.provenance`):
    the first commit stamped in each raw file's header ("commit abc1234",
    several joined by "/" where runs differ) and the command that made them."""
    import re
    stamps = []
    for path in files:
        for k, line in enumerate(open(path)):
            if k >= 40:  # the header; a launcher's warnings may come first
                break
            m = re.search(r"^# .*\bcommit ([0-9a-f]{7,40}(?:-dirty)?)", line)
            if m:  # the first stamp: the run's (a binary's own build stamp may follow)
                if m.group(1) not in stamps:
                    stamps.append(m.group(1))
                break
    commit = "/".join(s[:7] + ("-dirty" if s.endswith("-dirty") else "") for s in stamps) or "unknown"
    return f"*Commit `{commit}`; command: `{command}`.*"
