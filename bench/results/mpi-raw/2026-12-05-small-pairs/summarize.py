#!/usr/bin/env python3
"""Per ddl-bench output file and size: µs a call, out of place | in place, of every ddl
implementation in it, then MPI's call / ddl:auto. Usage: summarize.py [DIR]   (default: this
script's folder; 2026-12-05-median-copies/ is summarized by it too)"""
import glob, os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', '..', 'tools'))
from bench_table import times  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else here
for path in sorted(glob.glob(os.path.join(d, '*_run*.txt'))):
    rows = {}
    for (size, impl), t in times(path).items():
        rows.setdefault(size, {})[impl] = t
    print(os.path.basename(path))
    for size, impls in sorted(rows.items()):
        mpi = next(v for k, v in impls.items() if k.startswith('MPI_'))
        a = impls['ddl:auto']
        cells = ' '.join('%s %6.1f|%-6.1f' % (k[4:], *v) for k, v in impls.items() if k.startswith('ddl:'))
        print(f'  {size >> 10:6d}K {cells} MPI {mpi[0]:6.1f}|{mpi[1]:<6.1f} MPI/auto {mpi[0] / a[0]:.2f}|{mpi[1] / a[1]:.2f}')
