#!/usr/bin/env python3
"""Per file and size: µs a call, out of place | in place, of two_shot (cached slots), two_shot
(streamed) and auto, and MPI's call; then MPI / auto. Usage: summarize.py [DIR]"""
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
        cell = lambda k: '%6.1f|%-6.1f' % impls[k]
        print(f'  {size >> 10:3d}K cached {cell("ddl:two_shot")} streamed {cell("ddl:two_shot_stream")} '
              f'auto {cell("ddl:auto")} MPI {mpi[0]:6.1f}|{mpi[1]:<6.1f} MPI/auto {mpi[0] / a[0]:.2f}|{mpi[1] / a[1]:.2f}')
