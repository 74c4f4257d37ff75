#!/usr/bin/env python3
"""The two checks of run.sh, per run: µs a call out of place | in place, and the anchor / auto
(MPI_Allreduce with one call a sample and 100; the fixed cached two_shot with auto's measuring on and
off). Usage: summarize.py [DIR]   (default: this script's folder)"""
import glob, os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', '..', 'tools'))
from bench_table import times  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else here
for kind, anchor in (('batch1', 'MPI_Allreduce'), ('batch100', 'MPI_Allreduce'), ('tuneon', 'ddl:two_shot'),
                     ('tuneoff', 'ddl:two_shot')):
    print(f'## {kind}: auto and {anchor}, µs out of place | in place; {anchor} / auto')
    for path in sorted(glob.glob(os.path.join(d, f'{kind}_run*.txt'))):
        t = times(path)
        for size in sorted({s for s, _ in t}):
            a, b = t[(size, 'ddl:auto')], t[(size, anchor)]
            print(f'  {os.path.basename(path):18s} {size:6d} B  auto {a[0]:6.1f}|{a[1]:<6.1f} {anchor} {b[0]:6.1f}|{b[1]:<6.1f}'
                  f'  {b[0] / a[0]:.2f}|{b[1] / a[1]:.2f}')
