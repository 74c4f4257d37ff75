#!/usr/bin/env python3
"""Per round and size, out of place | in place: `auto`'s µs a call in the old and the new run, and
the anchors in the same run: MPI's call / auto (MPI runs) and the best fixed ddl strategy / auto;
then each ratio's median (min-max) over the rounds. Usage: summarize.py [DIR]   (default: this
script's folder; all-gather-40/ is summarized by it too)"""
import glob, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', '..', 'tools'))
from bench_table import median_range, times  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else here


def by_size(path):
    out = {}
    for (size, impl), t in times(path).items():
        out.setdefault(size, {})[impl] = t
    return out


def anchors(impls):
    """(name, (out of place, in place)) of MPI's call where the run has one, and of the best fixed
    ddl strategy in the run."""
    out = [('MPI', v) for k, v in impls.items() if k.startswith('MPI_')]
    fixed = [v for k, v in impls.items() if k.startswith('ddl:') and k != 'ddl:auto']
    return out + [('best', (min(v[0] for v in fixed), min(v[1] for v in fixed)))]


ratios = {}
for what in ('all_reduce', 'all_gather', 'threads'):
    runs = sorted(int(re.search(r'run(\d+)', p).group(1)) for p in glob.glob(os.path.join(d, f'new_{what}_run*.txt')))
    if not runs:
        continue
    print(f'## {what}: auto µs old -> new, out of place | in place; anchor / auto, old -> new')
    for r in runs:
        old, new = (by_size(os.path.join(d, f'{w}_{what}_run{r}.txt')) for w in ('old', 'new'))
        for size in sorted(new):
            a0, a1 = old[size]['ddl:auto'], new[size]['ddl:auto']
            cells = ''
            for (name, b0), (_, b1) in zip(anchors(old[size]), anchors(new[size])):
                cells += f'   {name}/auto {b0[0] / a0[0]:.2f}|{b0[1] / a0[1]:.2f} -> {b1[0] / a1[0]:.2f}|{b1[1] / a1[1]:.2f}'
                for k, place in enumerate(('oop', 'ip')):
                    ratios.setdefault((what, size, name, place, 'old'), []).append(b0[k] / a0[k])
                    ratios.setdefault((what, size, name, place, 'new'), []).append(b1[k] / a1[k])
            print(f'  run {r} {size >> 10:3d}K  {a0[0]:5.1f}|{a0[1]:<5.1f} -> {a1[0]:5.1f}|{a1[1]:<5.1f}{cells}')

print('## medians over the rounds (min-max), old -> new')
for what, size, name, place in sorted({k[:4] for k in ratios}):
    old, new = (ratios[(what, size, name, place, w)] for w in ('old', 'new'))
    print(f'  {what} {size >> 10:3d}K {place:3s} {name}/auto  {median_range(old, 2)} -> {median_range(new, 2)}')
