#!/usr/bin/env python3
"""Per ddl-bench output file and size: µs a call, out of place | in place, of every ddl
implementation in it, then MPI's call / ddl:auto. Usage: summarize.py [DIR]   (default: this
script's folder; 2026-12-05-median-copies/ is summarized by it too)"""
import glob, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(d, '*_run*.txt'))):
    rows = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        f = line.split()
        if len(f) > 10 and f[4] != 'floor:copy':
            rows.setdefault(int(f[0]), {})[f[4]] = (float(f[5]), float(f[10]))
    print(os.path.basename(path))
    for size, impls in sorted(rows.items()):
        mpi = next(v for k, v in impls.items() if k.startswith('MPI_'))
        a = impls['ddl:auto']
        cells = ' '.join('%s %6.1f|%-6.1f' % (k[4:], *v) for k, v in impls.items() if k.startswith('ddl:'))
        print(f'  {size >> 10:6d}K {cells} MPI {mpi[0]:6.1f}|{mpi[1]:<6.1f} MPI/auto {mpi[0] / a[0]:.2f}|{mpi[1] / a[1]:.2f}')
