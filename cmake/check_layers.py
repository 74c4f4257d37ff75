#!/usr/bin/env python3
"""Checks the include graph between the folders of include/ddl.

Two rules (issue 15, docs/design.md §2):
  1. generic folders never include a backend folder;
  2. no cycle between folders (a folder may include itself and folders below it).

Prints the folder graph and exits 1 naming the offending include on a violation.
Usage: check_layers.py <include dir>
"""
import os
import re
import sys

# Generic code, lowest layer first. A folder may include its own files and the
# folders listed before it.
GENERIC = ["detail", "core", "reduce", "topology", "shm", "transport", "rendezvous", "strategy", "comm"]
# Backends: each may include any generic folder and the backends listed before it
# (cuda stages through `staged`); none is included by generic code.
BACKENDS = ["local", "sim", "mpi", "ucx", "staged", "cuda"]
ORDER = GENERIC + BACKENDS
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def folder_of(path_in_ddl):
    parts = path_in_ddl.split("/")
    return parts[0] if len(parts) > 1 else None  # None: an umbrella header at ddl/ level


def main(root):
    ddl = os.path.join(root, "ddl")
    edges, errors = {}, []
    for dirpath, _, files in os.walk(ddl):
        for f in sorted(files):
            if not f.endswith(".hpp"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ddl).replace(os.sep, "/")
            src = folder_of(rel)
            if src is None:
                continue  # umbrella headers (ddl/mpi.hpp, ...) sit above everything
            if src not in ORDER:
                errors.append(f"{rel}: folder '{src}' is in neither the generic nor the backend list")
                continue
            with open(path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("ddl/"):
                        target = os.path.normpath(inc[4:])
                    elif inc.startswith("<") or "/" not in inc and not os.path.exists(os.path.join(dirpath, inc)):
                        continue  # a system header
                    else:
                        target = os.path.relpath(os.path.normpath(os.path.join(dirpath, inc)), ddl)
                    target = target.replace(os.sep, "/")
                    if not os.path.exists(os.path.join(ddl, target)):
                        continue  # a system or third-party header (<mpi.h>, <cuda_runtime.h>)
                    dst = folder_of(target)
                    where = f"{rel}:{lineno} includes {inc}"
                    if dst is None:
                        errors.append(f"{where}: a folder header includes an umbrella header")
                        continue
                    if dst == src:
                        continue
                    edges.setdefault(src, set()).add(dst)
                    if src in GENERIC and dst in BACKENDS:
                        errors.append(f"{where}: generic folder '{src}' includes backend '{dst}'")
                    elif dst not in ORDER or ORDER.index(dst) > ORDER.index(src):
                        errors.append(f"{where}: '{src}' includes '{dst}', which sits above it (a cycle in waiting)")
    print("folder include graph (folder -> folders it includes):")
    for src in ORDER:
        if src in edges:
            print(f"  {src:10} -> {', '.join(d for d in ORDER if d in edges[src])}")
    for e in errors:
        print("error: " + e)
    print(f"layers: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "include"))
