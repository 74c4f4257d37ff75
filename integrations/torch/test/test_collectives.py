"""Every collective the "ddl" backend offers, against gloo's result on the
same inputs in the same job (or, for the calls that only move data and for
send/recv, from one rank or any, against what every rank can compute of
every rank's input); then
the calls it does not offer and a dtype it does not take must raise clear
errors. Run under mpiexec (-n 2, -n 4: the group runs over MPI) or ddl-run
(-n 3: over UCX).
Prints "torch collectives: N failed" on rank 0; exits non-zero on failure."""
import os
import sys

import torch
import torch.distributed as dist

import ddl_torch

rank, size = ddl_torch.launch_rank_and_size()
store = f"/tmp/ddl-torch-test-{os.getppid()}"  # one store per job (its launcher)
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
ddl = dist.new_group(backend="ddl")
gloo_group = dist.new_group(backend="gloo")
failures = []


def check(name, ok):
    if not ok:
        failures.append(name)


def gloo(fn, *a, **k):
    """gloo as the reference; it divides by zero on empty tensors, so those skip it."""
    t = a[0] if a and isinstance(a[0], torch.Tensor) else None
    if t is not None and t.numel() == 0:
        return
    fn(*a, **k)


def inputs(dtype, n, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    # integer-valued, so every reduction order gives the same bits
    return torch.randint(-8, 9, (n,), generator=g).to(dtype)


dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX}
for dtype in dtypes:
    for n in (0, 1, 7, 1000, 65537):
        for name, op in ops.items():
            if name == "PRODUCT" and dtype in (torch.float16, torch.bfloat16) and n:
                x = torch.ones(n, dtype=dtype) * (1 if rank % 2 else -1)  # stays exact
            else:
                x = inputs(dtype, n, salt=n)
            a, b = x.clone(), x.to(torch.float64)  # the reference in float64 (exact here)
            dist.all_reduce(a, op=op, group=ddl)
            gloo(dist.all_reduce, b, op=op, group=gloo_group)
            check(f"all_reduce {name} {dtype} n={n}", torch.equal(a, b.to(dtype)))
        # AVG: gloo has none; the reference is the exact sum over the ranks, divided once
        if dtype.is_floating_point and n:
            x = inputs(dtype, n, salt=7)
            a, s = x.clone(), x.to(torch.float64)
            dist.all_reduce(a, op=dist.ReduceOp.AVG, group=ddl)
            gloo(dist.all_reduce, s, op=dist.ReduceOp.SUM, group=gloo_group)
            wide = torch.float64 if dtype == torch.float64 else torch.float32  # ddl's compute type
            check(f"all_reduce AVG {dtype} n={n}", torch.equal(a, (s.to(dtype).to(wide) / size).to(dtype)))
        for root in range(size):
            a = inputs(dtype, n, salt=root) if rank == root else torch.zeros(n, dtype=dtype)
            b = a.to(torch.float64)
            work = dist.broadcast(a, src=root, group=ddl, async_op=True)
            work.wait()
            gloo(dist.broadcast, b, src=root, group=gloo_group)
            check(f"broadcast root {root} {dtype} n={n}", torch.equal(a, b.to(dtype)))
        x = inputs(dtype, n, salt=3)
        outs_a = [torch.zeros(n, dtype=dtype) for _ in range(size)]
        outs_b = [torch.zeros(n, dtype=torch.float64) for _ in range(size)]
        dist.all_gather(outs_a, x, group=ddl)
        if n:
            dist.all_gather(outs_b, x.to(torch.float64), group=gloo_group)
        outs_b = [o.to(dtype) for o in outs_b]
        check(f"all_gather {dtype} n={n}", all(torch.equal(p, q) for p, q in zip(outs_a, outs_b)))
        # gather: every part on the root, in rank order; nothing elsewhere
        for root in range(size):
            outs = [torch.full((n,), 5, dtype=dtype) for _ in range(size)] if rank == root else None
            dist.gather(x, outs, dst=root, group=ddl)
            if rank == root:
                check(f"gather root {root} {dtype} n={n}", all(torch.equal(p, q) for p, q in zip(outs, outs_b)))
        flat = torch.zeros(size * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, x, group=ddl)
        check(f"all_gather_into_tensor {dtype} n={n}", torch.equal(flat, torch.cat(outs_b)))
        # reduce_scatter: gloo has none; the reference is all_reduce then this rank's block
        parts = [inputs(dtype, n, salt=10 + i) for i in range(size)]
        full = torch.cat(parts).to(torch.float64)
        gloo(dist.all_reduce, full, group=gloo_group)
        full = full.to(dtype)
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter(out, parts, group=ddl)
        check(f"reduce_scatter {dtype} n={n}", torch.equal(out, full[rank * n:(rank + 1) * n]))
        out2 = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(out2, torch.cat(parts), group=ddl)
        check(f"reduce_scatter_tensor {dtype} n={n}", torch.equal(out2, out))
        # reduce: the all-reduced sum on the root; the other ranks' tensors unchanged
        for root in range(size):
            a = parts[root].clone()
            dist.reduce(a, dst=root, group=ddl)
            want = full[root * n:(root + 1) * n] if rank == root else parts[root]  # all_reduce of parts[root]
            check(f"reduce root {root} {dtype} n={n}", torch.equal(a, want))
        # scatter: the root's i-th tensor on rank i
        for root in range(size):
            # the root's list, which every rank can make (seeded by root and part, not by rank)
            ins = [torch.randint(-8, 9, (n,), generator=torch.Generator().manual_seed(7000 + 100 * root + i)).to(dtype)
                   for i in range(size)]
            out3 = torch.full((n,), 5, dtype=dtype)
            dist.scatter(out3, ins if rank == root else None, src=root, group=ddl)
            check(f"scatter root {root} {dtype} n={n}", torch.equal(out3, ins[rank]))

# all_reduce_coalesced: tensors of several shapes (one empty) in one call.
for dtype in (torch.float32, torch.int64):
    xs = [inputs(dtype, n, salt=70 + n).reshape(shape) for n, shape in ((6, (2, 3)), (0, (0,)), (1001, (1001,)))]
    refs = [x.clone() for x in xs]
    dist.all_reduce_coalesced(xs, group=ddl)
    for r in refs:
        gloo(dist.all_reduce, r, group=gloo_group)
    check(f"all_reduce_coalesced {dtype}", all(torch.equal(x, r) for x, r in zip(xs, refs)))

# Asynchronous: several in flight, waited out of order, futures completed.
xs = [inputs(torch.float32, 10000 + i, salt=i) for i in range(5)]
refs = [x.clone() for x in xs]
works = [dist.all_reduce(x, group=ddl, async_op=True) for x in xs]
futs = [w.get_future() for w in works]
for w in reversed(works):
    w.wait()
for r in refs:
    dist.all_reduce(r, group=gloo_group)
check("async all_reduce", all(torch.equal(x, r) for x, r in zip(xs, refs)))
check("futures completed", all(f.done() for f in futs) and torch.equal(futs[0].value()[0], refs[0]))
check("is_completed", all(w.is_completed() for w in works))

# The list forms of all_gather and reduce_scatter go through flat scratch
# buffers kept between calls: several in flight at once (each needs its own),
# sizes and dtypes changing from call to call, waited out of order.
shapes = [(torch.float32, 70001), (torch.float64, 3), (torch.float32, 70001), (torch.int64, 1000), (torch.float32, 0)]
gathers, scatters = [], []
for i, (dtype, n) in enumerate(shapes):
    x = inputs(dtype, n, salt=20 + i)
    outs = [torch.zeros(n, dtype=dtype) for _ in range(size)]
    gathers.append((x, outs, dist.all_gather(outs, x, group=ddl, async_op=True)))
    parts = [inputs(dtype, n, salt=40 + 10 * i + j) for j in range(size)]
    out = torch.zeros(n, dtype=dtype)
    scatters.append((parts, out, dist.reduce_scatter(out, parts, group=ddl, async_op=True)))
for _, _, w in reversed(gathers + scatters):
    w.wait()
for i, ((x, outs, _), (parts, out, _)) in enumerate(zip(gathers, scatters)):
    n = x.numel()
    ref = [torch.zeros_like(x) for _ in range(size)]
    if n:
        dist.all_gather(ref, x, group=gloo_group)
    check(f"async all_gather {i} ({x.dtype}, n={n})", all(torch.equal(a, b) for a, b in zip(outs, ref)))
    full = torch.cat(parts)
    gloo(dist.all_reduce, full, group=gloo_group)
    check(f"async reduce_scatter {i} ({x.dtype}, n={n})", torch.equal(out, full[rank * n:(rank + 1) * n]))
dist.barrier(group=ddl)

# A second ddl group (its own transport and progress thread): both groups'
# asynchronous all_reduces in flight at once, many times over, sizes changing.
ddl2 = dist.new_group(backend="ddl")
wrong = 0
for it in range(60):
    xs = [inputs(torch.float32, 1 << (6 + it % 12), salt=100 + it + i) for i in range(4)]
    refs = [x.clone() for x in xs]
    works = [dist.all_reduce(x, group=ddl if i % 2 == 0 else ddl2, async_op=True) for i, x in enumerate(xs)]
    for w in reversed(works):
        w.wait()
    for r in refs:
        dist.all_reduce(r, group=gloo_group)
    wrong += sum(not torch.equal(x, r) for x, r in zip(xs, refs))
check(f"two ddl groups at once ({wrong} of 240 all_reduces wrong)", wrong == 0)

# Subgroups: every rank in one of two ddl groups of a subset of the ranks
# (at 4 ranks [0, 2, 3] and [1]; at 2 ranks [0] and [1]), both working at
# once on their own ranks, against gloo groups of the same ranks. A group's
# broadcast root is a global rank; the reduce_scatter blocks go by group rank.
spans = [[r for r in range(size) if r != 1], [1]]
mine = None
for members in spans:  # every rank makes every group, in the same order
    pair = (members, dist.new_group(ranks=members, backend="ddl"), dist.new_group(ranks=members, backend="gloo"))
    if rank in members:
        mine = pair
members, sub, gsub = mine
m, me = len(members), members.index(rank)
check(f"subgroup {members}: size and rank", dist.get_world_size(sub) == m and dist.get_rank(sub) == me)
for dtype in (torch.float32, torch.int64):
    for n in (0, 1, 1000, 65537):
        x = inputs(dtype, n, salt=200 + n)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, group=sub)
        gloo(dist.all_reduce, b, group=gsub)
        check(f"subgroup {members} all_reduce {dtype} n={n}", torch.equal(a, b))
        for root in members:
            a = inputs(dtype, n, salt=300 + root) if rank == root else torch.zeros(n, dtype=dtype)
            b = a.clone()
            dist.broadcast(a, src=root, group=sub)
            gloo(dist.broadcast, b, src=root, group=gsub)
            check(f"subgroup {members} broadcast root {root} {dtype} n={n}", torch.equal(a, b))
        outs_a = [torch.zeros(n, dtype=dtype) for _ in range(m)]
        outs_b = [torch.zeros(n, dtype=dtype) for _ in range(m)]
        dist.all_gather(outs_a, x, group=sub)
        if n:
            dist.all_gather(outs_b, x, group=gsub)
        check(f"subgroup {members} all_gather {dtype} n={n}", all(torch.equal(p, q) for p, q in zip(outs_a, outs_b)))
        parts = [inputs(dtype, n, salt=400 + i) for i in range(m)]
        full = torch.cat(parts)
        gloo(dist.all_reduce, full, group=gsub)
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(parts), group=sub)
        check(f"subgroup {members} reduce_scatter {dtype} n={n}", torch.equal(out, full[me * n:(me + 1) * n]))
        for root in members:  # global ranks, as torch takes them
            i = members.index(root)
            a = parts[i].clone()
            dist.reduce(a, dst=root, group=sub)
            check(f"subgroup {members} reduce root {root} {dtype} n={n}",
                  torch.equal(a, full[i * n:(i + 1) * n] if rank == root else parts[i]))
            outs = [torch.zeros(n, dtype=dtype) for _ in range(m)] if rank == root else None
            dist.gather(x, outs, dst=root, group=sub)
            check(f"subgroup {members} gather root {root} {dtype} n={n}",
                  rank != root or all(torch.equal(p, q) for p, q in zip(outs, outs_b)))
            out = torch.zeros(n, dtype=dtype)
            dist.scatter(out, parts if rank == root else None, src=root, group=sub)
            b = parts[me].clone() if rank == root else torch.zeros(n, dtype=dtype)
            gloo(dist.scatter, b, parts if rank == root else None, src=root, group=gsub)
            check(f"subgroup {members} scatter root {root} {dtype} n={n}", torch.equal(out, b))
dist.barrier(group=sub)
# ...and the whole-job ddl group still works beside them.
x = inputs(torch.float32, 4097, salt=500)
a, b = x.clone(), x.clone()
dist.all_reduce(a, group=ddl)
dist.all_reduce(b, group=gloo_group)
check("whole-job group after the subgroups", torch.equal(a, b))

# Calls that only move data take any dtype (ddl moves the bytes of those it
# does not reduce): odd byte counts, every root, against what each rank can
# compute of every rank's input. Then the object collectives built on them.
def anyt(dtype, n, r, salt):
    g = torch.Generator().manual_seed(5000 + 1000 * r + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype == torch.complex64:
        return torch.randn(n, dtype=dtype, generator=g)
    return torch.randint(0, 120, (n,), generator=g).to(dtype)


for dtype in (torch.uint8, torch.int8, torch.bool, torch.int16, torch.complex64):
    for n in (0, 1, 7, 1001):
        x = anyt(dtype, n, rank, n)
        every = [anyt(dtype, n, q, n) for q in range(size)]
        for root in range(size):
            a = x.clone() if rank == root else torch.zeros(n, dtype=dtype)
            dist.broadcast(a, src=root, group=ddl)
            check(f"broadcast root {root} {dtype} n={n}", torch.equal(a, every[root]))
            outs = [torch.zeros(n, dtype=dtype) for _ in range(size)] if rank == root else None
            dist.gather(x, outs, dst=root, group=ddl)
            check(f"gather root {root} {dtype} n={n}", rank != root or all(map(torch.equal, outs, every)))
            ins = [anyt(dtype, n, 100 + root, i) for i in range(size)]  # the root's list, which every rank can make
            out = torch.zeros(n, dtype=dtype)
            dist.scatter(out, ins if rank == root else None, src=root, group=ddl)
            check(f"scatter root {root} {dtype} n={n}", torch.equal(out, ins[rank]))
        outs = [torch.zeros(n, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, x, group=ddl)
        check(f"all_gather {dtype} n={n}", all(map(torch.equal, outs, every)))
        flat = torch.zeros(size * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, x, group=ddl)
        check(f"all_gather_into_tensor {dtype} n={n}", torch.equal(flat, torch.cat(every)))
# all_to_all: every rank can make what every rank sends it (`part`), so the
# reference is independent of both backends. Equal parts, split sizes (rows
# of a 2-D tensor, some zero), the list form with parts of any size; every
# dtype; the whole job and the subgroups.
def part(dtype, src, dst, n, cols=1):
    t = anyt(dtype, n * cols, src, 7000 + 31 * dst + n * cols)
    return t.reshape(n, cols) if cols > 1 else t


def all_to_all_checks(group, members, tag):
    m, me = len(members), members.index(rank)
    for dtype in dtypes + [torch.uint8, torch.bool, torch.int16, torch.complex64]:
        for n in (0, 1, 7, 1001):
            ins = [part(dtype, rank, members[k], n) for k in range(m)]
            out = torch.zeros(m * n, dtype=dtype)
            dist.all_to_all_single(out, torch.cat(ins), group=group)
            want = torch.cat([part(dtype, members[j], rank, n) for j in range(m)])
            check(f"{tag} all_to_all_single {dtype} n={n}", torch.equal(out, want))
            # split sizes: rank a sends rank b (a + 2 b + n) % 3 rows of 3 columns
            rows = lambda a, b: (members.index(a) + 2 * members.index(b) + n) % 3
            sends = [rows(rank, members[k]) for k in range(m)]
            recvs = [rows(members[j], rank) for j in range(m)]
            src = torch.cat([part(dtype, rank, members[k], sends[k], 3).reshape(-1, 3) for k in range(m)])
            out = torch.zeros(sum(recvs), 3, dtype=dtype)
            dist.all_to_all_single(out, src, output_split_sizes=recvs, input_split_sizes=sends, group=group)
            want = torch.cat([part(dtype, members[j], rank, recvs[j], 3).reshape(-1, 3) for j in range(m)])
            check(f"{tag} all_to_all_single with splits {dtype} n={n}", torch.equal(out, want))
            # the list form: parts of any size (rank a sends rank b n + a - b elements, at least 0)
            size_of = lambda a, b: max(0, n + members.index(a) - members.index(b))
            outs = [torch.zeros(size_of(members[j], rank), dtype=dtype) for j in range(m)]
            dist.all_to_all(outs, [part(dtype, rank, members[k], size_of(rank, members[k])) for k in range(m)],
                            group=group)
            check(f"{tag} all_to_all {dtype} n={n}",
                  all(torch.equal(outs[j], part(dtype, members[j], rank, size_of(members[j], rank))) for j in range(m)))


# send and recv: every rank hands its successor in the group tensors of
# every dtype (what each sends, every rank can make: `anyt`), asynchronous
# under two tags posted in the other order, blocking (the first member sends
# first, the others receive first), and through batch_isend_irecv.
def p2p_checks(group, members, tag):
    m, me = len(members), members.index(rank)
    if m < 2:
        return
    nxt, prv = members[(me + 1) % m], members[(me - 1) % m]
    for dtype in dtypes + [torch.uint8, torch.bool, torch.int16, torch.complex64]:
        for n in (0, 1, 7, 1001):
            mine = lambda k: anyt(dtype, n + k, rank, 9000 + 100 * k + n)
            theirs = lambda k: anyt(dtype, n + k, prv, 9000 + 100 * k + n)
            got = [torch.zeros(n + k, dtype=dtype) for k in range(3)]
            works = [dist.irecv(got[1], src=prv, group=group, tag=2), dist.irecv(got[0], src=prv, group=group, tag=1),
                     dist.isend(mine(0), dst=nxt, group=group, tag=1), dist.isend(mine(1), dst=nxt, group=group, tag=2)]
            for w in works:
                w.wait()
            if me == 0:
                dist.send(mine(2), dst=nxt, group=group)
                dist.recv(got[2], src=prv, group=group)
            else:
                dist.recv(got[2], src=prv, group=group)
                dist.send(mine(2), dst=nxt, group=group)
            check(f"{tag} isend/irecv {dtype} n={n}", torch.equal(got[0], theirs(0)) and torch.equal(got[1], theirs(1)))
            check(f"{tag} send/recv {dtype} n={n}", torch.equal(got[2], theirs(2)))
            back = torch.zeros(n, dtype=dtype)
            ops = [dist.P2POp(dist.isend, mine(0), prv, group), dist.P2POp(dist.irecv, back, nxt, group)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            check(f"{tag} batch_isend_irecv {dtype} n={n}", torch.equal(back, anyt(dtype, n, nxt, 9000 + n)))
    # recv without src: the first member takes every other member's tensor,
    # each once, and learns who sent it (a dtype ddl reduces, and one it moves as bytes).
    for dtype in (torch.float64, torch.uint8):
        if me == 0:
            seen = set()
            for _ in range(m - 1):
                t = torch.zeros(5, dtype=dtype)
                src = dist.recv(t, group=group, tag=5)
                check(f"{tag} recv from any source {dtype} names a new member ({src})",
                      src in members and src != rank and src not in seen)
                seen.add(src)
                check(f"{tag} recv from any source {dtype}: {src}'s tensor", torch.equal(t, anyt(dtype, 5, src, 9500)))
        else:
            dist.send(anyt(dtype, 5, rank, 9500), dst=members[0], group=group, tag=5)
        dist.barrier(group=group)


p2p_checks(ddl, list(range(size)), "whole job")
p2p_checks(sub, members, f"subgroup {members}")
all_to_all_checks(ddl, list(range(size)), "whole job")
all_to_all_checks(sub, members, f"subgroup {members}")

objs = [{"rank": q, "name": "r" * (q + 1), "data": list(range(q * 3))} for q in range(size)]
got = [None] * size
dist.all_gather_object(got, objs[rank], group=ddl)
check("all_gather_object", got == objs)
for root in range(size):
    lst = [objs[root], ("tuple", root)] if rank == root else [None, None]
    dist.broadcast_object_list(lst, src=root, group=ddl)
    check(f"broadcast_object_list root {root}", lst == [objs[root], ("tuple", root)])
    got = [None] * size if rank == root else None
    dist.gather_object(objs[rank], got, dst=root, group=ddl)
    check(f"gather_object root {root}", rank != root or got == objs)
    out = [None]
    dist.scatter_object_list(out, [o for o in objs] if rank == root else None, src=root, group=ddl)
    check(f"scatter_object_list root {root}", out[0] == objs[rank])


def raises(name, fn, words):
    try:
        fn()
    except RuntimeError as e:
        check(name + f" names the problem ({e})", all(w in str(e) for w in words))
    else:
        failures.append(name + " did not raise")


raises("send tag", lambda: dist.send(torch.zeros(3), dst=(rank + 1) % size, group=ddl, tag=20000),
       ["send", "tag 20000"])
raises("all_to_all split sizes", lambda: dist.all_to_all_single(torch.zeros(size + 1), torch.zeros(size + 1),
                                                                 group=ddl), ["rows", "equal parts"])
raises("uint8", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.uint8), group=ddl), ["dtype", "Byte"])
raises("BAND", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int32), op=dist.ReduceOp.BAND, group=ddl),
       ["reduce op"])
raises("non-contiguous", lambda: dist.all_reduce(torch.zeros(4, 4).t(), group=ddl), ["contiguous"])

total = torch.tensor([len(failures)])
dist.all_reduce(total, group=gloo_group)
for f in failures[:20]:
    print(f"rank {rank}: FAILED {f}", file=sys.stderr)
if rank == 0:
    print(f"torch collectives: {int(total)} failed on {size} ranks over {ddl_torch.transport()}")
dist.barrier(group=gloo_group)
dist.destroy_process_group()
if rank == 0 and os.path.exists(store):
    os.remove(store)
sys.exit(1 if int(total) else 0)
