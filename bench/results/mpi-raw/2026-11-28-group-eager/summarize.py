#!/usr/bin/env python3
"""ddl µs a call, in place, per rank count, size and strategy: median of the rounds, old (11a13c4) and new
(group views forward eager_bytes), and new/old. usage: summarize.py DIR (files {old,new}-nN-rR.txt)"""
import glob,statistics,re,collections,sys
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    b,n,r=re.match(r'.*/(old|new)-n(\d)-r(\d).txt',f).groups()
    for line in open(f):
        x=line.split()
        if len(x)>11 and x[0].isdigit() and x[4].startswith('ddl:'):
            d[(int(n),int(x[0]),b,x[4])].append(float(x[10]))
for n in (2,4,8):
    for s in sorted({k[1] for k in d if k[0]==n}):
        for impl in sorted({k[3] for k in d}):
            o=d[(n,s,'old',impl)];w=d[(n,s,'new',impl)]
            if not o or not w: continue
            print(n,s,impl,'old %.1f new %.1f  new/old %.2f'%(statistics.median(o),statistics.median(w),statistics.median(w)/statistics.median(o)), o, w)
