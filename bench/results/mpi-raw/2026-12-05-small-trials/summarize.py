#!/usr/bin/env python3
"""Per round and size, out of place | in place: `auto`'s µs a call in the old and the new run, and
the anchors in the same run: MPI's call / auto (MPI runs) and the best fixed ddl strategy / auto.
Usage: summarize.py [DIR]   (default: this script's folder)"""
import glob, os, re, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def rows(path):
    out = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        f = line.split()
        if len(f) > 10 and f[4] != 'floor:copy':
            out.setdefault(int(f[0]), {})[f[4]] = (float(f[5]), float(f[10]))
    return out


def anchors(impls):
    """(name, (out of place, in place)) of MPI's call where the run has one, and of the best fixed
    ddl strategy in the run."""
    out = [('MPI', v) for k, v in impls.items() if k.startswith('MPI_')]
    fixed = [v for k, v in impls.items() if k.startswith('ddl:') and k != 'ddl:auto']
    return out + [('best', (min(v[0] for v in fixed), min(v[1] for v in fixed)))]


for what in ('all_reduce', 'all_gather', 'threads'):
    print(f'## {what}: auto µs old -> new, out of place | in place; anchor / auto, old -> new')
    runs = sorted(int(m.group(1)) for p in glob.glob(os.path.join(d, f'new_{what}_run*.txt'))
                  for m in [re.search(r'run(\d+)', p)])
    for r in runs:
        old, new = (rows(os.path.join(d, f'{w}_{what}_run{r}.txt')) for w in ('old', 'new'))
        for size in sorted(new):
            a0, a1 = old[size]['ddl:auto'], new[size]['ddl:auto']
            cells = ''.join(f'   {name}/auto {b0[0] / a0[0]:.2f}|{b0[1] / a0[1]:.2f} -> {b1[0] / a1[0]:.2f}|{b1[1] / a1[1]:.2f}'
                            for (name, b0), (_, b1) in zip(anchors(old[size]), anchors(new[size])))
            print(f'  run {r} {size >> 10:3d}K  {a0[0]:5.1f}|{a0[1]:<5.1f} -> {a1[0]:5.1f}|{a1[1]:<5.1f}{cells}')

# Medians (min-max) over the rounds of each ratio, old -> new.
import statistics


def span(v):
    return f'{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})'


print('## medians over the rounds (min-max), old -> new; out of place, then in place')
for what in ('all_reduce', 'all_gather', 'threads'):
    ratios = {}
    for p in glob.glob(os.path.join(d, f'new_{what}_run*.txt')):
        r = re.search(r'run(\d+)', p).group(1)
        for w in ('old', 'new'):
            for size, impls in rows(os.path.join(d, f'{w}_{what}_run{r}.txt')).items():
                a = impls['ddl:auto']
                for name, b in anchors(impls):
                    for k, place in enumerate(('oop', 'ip')):
                        ratios.setdefault((size, name, place, w), []).append(b[k] / a[k])
    for size, name, place in sorted({k[:3] for k in ratios}):
        print(f'  {what} {size >> 10:3d}K {place:3s} {name}/auto  '
              f'{span(ratios[(size, name, place, "old")])} -> {span(ratios[(size, name, place, "new")])}')
