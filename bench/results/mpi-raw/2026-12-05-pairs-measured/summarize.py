#!/usr/bin/env python3
"""Per run, per size: auto's time, its ratio to the anchor in the same run (MPI_Allreduce / auto over
MPI; the best of ring, two_shot and two_shot_stream / auto on threads), out of place | in place,
and the plan auto ran. Usage: summarize.py [DIR]   (default: this script's folder)"""
import glob, os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', '..', 'tools'))
import bench_table  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else here


def rows(path):
    out = {}
    for size, impl, oop, ip, line in bench_table.rows(path):
        f = line.split()
        out.setdefault(size, {})[impl] = (oop, ip, ' '.join(f[15:]) if len(f) > 15 else '')
    return out

for kind in ('mpi', 'threads'):
    print(f'## {kind}, 2 ranks: auto (us) and anchor / auto, out of place | in place')
    for which in ('old', 'new'):
        for path in sorted(glob.glob(os.path.join(d, f'{which}_{kind}_n2_run*.txt'))):
            print(f'### {os.path.basename(path)}')
            for size, impls in sorted(rows(path).items()):
                a = impls.get('ddl:auto')
                if not a:
                    continue
                if kind == 'mpi':
                    anc = impls.get('MPI_Allreduce')
                    ao, ai = anc[0], anc[1]
                else:
                    others = [v for k, v in impls.items() if k not in ('ddl:auto', 'floor:copy')]
                    ao, ai = min(v[0] for v in others), min(v[1] for v in others)
                print(f'{size:>10} auto {a[0]:9.1f} | {a[1]:9.1f}   ratio {ao / a[0]:5.2f} | {ai / a[1]:5.2f}   {a[2]}')
