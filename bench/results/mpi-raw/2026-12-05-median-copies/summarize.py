#!/usr/bin/env python3
"""Per file: MPI's time / auto's per size, out of place | in place, and the plan auto ran.
Usage: summarize.py [DIR]   (default: this script's folder)"""
import glob, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(d, '*_run*.txt'))):
    rows = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        f = line.split()
        if len(f) > 10 and f[4] != 'floor:copy':
            rows.setdefault(int(f[0]), {})[f[4]] = (float(f[5]), float(f[10]), ' '.join(f[15:]))
    cells = []
    for size, impls in sorted(rows.items()):
        a = impls['ddl:auto']
        m = [v for k, v in impls.items() if k != 'ddl:auto'][0]
        cells.append(f'{size >> 10}K {m[0] / a[0]:.2f}|{m[1] / a[1]:.2f}')
    print(f'{os.path.basename(path):34s}', '  '.join(cells))
