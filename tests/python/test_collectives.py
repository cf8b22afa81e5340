"""Every collective of the torch.distributed backend and of the direct API on
4 simulated ranks (nvidia:2 + amd:2), checked against values each rank
computes itself from the inputs every rank is known to hold."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbBroadcast", "gbReduce", "gbAllGather", "gbReduceScatter", "gbAllToAll",
         "gbSend", "gbRecv", "gbGroupStart", "gbRedOpCreatePreMulSum", "gbBarrier")


def data(rank, n, dtype, torch, salt=0):
    """Rank r's input: small integers (exact in every float type), different per rank."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return torch.randint(-8, 9, (n,), generator=g).to(dtype)


def worker():
    import datetime

    import torch
    import torch.distributed as dist

    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    inputs = [data(r, 10, torch.float32, torch) for r in range(world)]
    total = sum(inputs)

    # all_reduce: sum, avg, max, min, prod, premul_sum; in several dtypes
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64):
        ins = [x.to(dtype) for x in inputs]
        t = ins[rank].clone()
        dist.all_reduce(t)
        exp = ins[0].clone()
        for x in ins[1:]:
            exp = exp + x
        check(torch.equal(t, exp), "all_reduce sum %s: %s != %s" % (dtype, t, exp))
        t = ins[rank].clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        check(torch.equal(t, torch.stack(ins).max(0).values), "all_reduce max %s" % dtype)
    t = inputs[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    check(torch.equal(t, torch.stack(inputs).min(0).values), "all_reduce min")
    t = inputs[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    check(torch.equal(t, torch.stack(inputs).prod(0)), "all_reduce prod")
    t = inputs[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.allclose(t, total / world, atol=1e-6), "all_reduce avg: %s vs %s" % (t, total / world))
    t = inputs[rank].clone()
    dist.all_reduce(t, op=gpubridge.premul_sum(0.5))
    check(torch.allclose(t, total * 0.5, atol=1e-6), "all_reduce premul_sum(0.5)")
    t = inputs[rank].clone()
    dist.all_reduce(t, op=gpubridge.premul_sum(torch.tensor([0.25])))  # a scalar in "device" memory
    check(torch.allclose(t, total * 0.25, atol=1e-6), "all_reduce premul_sum(tensor 0.25)")
    b = torch.tensor([rank == 2, False, True])
    dist.all_reduce(b)  # bool sum is "any", as NCCL
    check(b.tolist() == [True, False, True], "all_reduce bool: %s" % b)

    # fp8 (docs/REDUCTION_ORDER.md): nvidia:2 + amd:2 runs hierarchical, so
    # rank r's result is (x0 + x1) + (x2 + x3), each step in float and
    # rounded back as torch converts (e4m3fn saturates at 448).
    def fold(xs, dt, scale=None):
        q = (lambda v: v.to(dt).float())
        if scale is not None:
            xs = [q(x.float() * scale) for x in xs]
        return q(q(xs[0].float() + xs[1].float()) + q(xs[2].float() + xs[3].float()))

    bits = (lambda v: v.view(torch.uint8).tolist())
    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        xs = [(data(r, 64, torch.float32, torch, salt=7) * 37.5).to(dt) for r in range(world)]
        t = xs[rank].clone()
        dist.all_reduce(t)
        check(bits(t) == bits(fold(xs, dt).to(dt)), "all_reduce sum %s: %s != %s" % (dt, t, fold(xs, dt)))
        t = xs[rank].clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        check(bits(t) == bits((fold(xs, dt) / world).to(dt)), "all_reduce avg %s" % dt)
        t = xs[rank].clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        check(bits(t) == bits(torch.stack([x.float() for x in xs]).max(0).values.to(dt)), "all_reduce max %s" % dt)
        t = xs[rank].clone()
        dist.all_reduce(t, op=gpubridge.premul_sum(0.5))
        check(bits(t) == bits(fold(xs, dt, 0.5).to(dt)), "all_reduce premul_sum(0.5) %s" % dt)
        out = torch.empty(world * 64, dtype=dt)
        dist.all_gather_into_tensor(out, xs[rank])
        check(bits(out) == bits(torch.cat(xs)), "all_gather %s" % dt)
        t = xs[rank].clone()
        dist.broadcast(t, src=1)
        check(bits(t) == bits(xs[1]), "broadcast %s" % dt)
        if dt == torch.float8_e4m3fn:  # the sums reach past 448 and saturate, so the test sees it
            check((fold(xs, dt).abs() == 448).any() and max(abs(sum(x.float() for x in xs))) > 464,
                  "e4m3 inputs reach saturation")

    # non-contiguous tensor, in place
    m = torch.stack([inputs[rank], inputs[rank]], 1)  # 10 x 2
    col = m[:, 1]
    dist.all_reduce(col)
    check(torch.equal(m[:, 1], total) and torch.equal(m[:, 0], inputs[rank]), "all_reduce non-contiguous")

    # broadcast from every root
    for root in range(world):
        t = inputs[rank].clone()
        dist.broadcast(t, src=root)
        check(torch.equal(t, inputs[root]), "broadcast root %d" % root)

    # reduce to rank 3
    t = inputs[rank].clone()
    dist.reduce(t, dst=3)
    if rank == 3:
        check(torch.equal(t, total), "reduce at root")

    # all_gather_into_tensor, all_gather (list)
    out = torch.empty(world * 10)
    dist.all_gather_into_tensor(out, inputs[rank])
    check(torch.equal(out, torch.cat(inputs)), "all_gather_into_tensor")
    outs = [torch.empty(10) for _ in range(world)]
    dist.all_gather(outs, inputs[rank])
    check(all(torch.equal(o, x) for o, x in zip(outs, inputs)), "all_gather list")

    # reduce_scatter_tensor: sum, avg, premul; and the list form
    big = [data(r, 4 * world, torch.float32, torch, salt=7) for r in range(world)]
    bsum = sum(big)
    o = torch.empty(4)
    dist.reduce_scatter_tensor(o, big[rank].clone())
    check(torch.equal(o, bsum[4 * rank:4 * rank + 4]), "reduce_scatter_tensor sum")
    dist.reduce_scatter_tensor(o, big[rank].clone(), op=dist.ReduceOp.AVG)
    check(torch.allclose(o, bsum[4 * rank:4 * rank + 4] / world), "reduce_scatter_tensor avg")
    dist.reduce_scatter_tensor(o, big[rank].clone(), op=gpubridge.premul_sum(0.25))
    check(torch.allclose(o, bsum[4 * rank:4 * rank + 4] * 0.25), "reduce_scatter_tensor premul_sum")
    dist.reduce_scatter(o, list(big[rank].clone().chunk(world)))
    check(torch.equal(o, bsum[4 * rank:4 * rank + 4]), "reduce_scatter list")

    # all_to_all_single: equal and unequal splits; all_to_all list
    send = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    recv = torch.empty(world * 2)
    dist.all_to_all_single(recv, send)
    exp = torch.cat([torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32) + 100 * p for p in range(world)])
    check(torch.equal(recv, exp), "all_to_all_single equal: %s vs %s" % (recv, exp))
    in_splits = [p + 1 for p in range(world)]             # rank r sends p+1 rows to p
    out_splits = [rank + 1] * world                       # and receives r+1 rows from each
    send = torch.full((sum(in_splits),), float(rank))
    recv = torch.empty(sum(out_splits))
    dist.all_to_all_single(recv, send, out_splits, in_splits)
    exp = torch.cat([torch.full((rank + 1,), float(p)) for p in range(world)])
    check(torch.equal(recv, exp), "all_to_all_single unequal")
    outs = [torch.empty(3) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((3,), float(10 * rank + p)) for p in range(world)])
    check(all(torch.equal(outs[p], torch.full((3,), float(10 * p + rank))) for p in range(world)), "all_to_all")

    # send/recv around a ring, gather, scatter
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    t = torch.empty(5)
    if rank % 2 == 0:
        dist.send(inputs[rank][:5].clone(), nxt)
        dist.recv(t, prv)
    else:
        dist.recv(t, prv)
        dist.send(inputs[rank][:5].clone(), nxt)
    check(torch.equal(t, inputs[prv][:5]), "send/recv ring")
    # every rank sends first: held and fused into one group per rank (as NCCL's batch)
    t = torch.empty(7)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, inputs[rank][:7].clone(), nxt),
                                   dist.P2POp(dist.irecv, t, prv)])
    for r in reqs:
        r.wait()
    check(torch.equal(t, inputs[prv][:7]), "batch_isend_irecv ring: %s" % t)
    a, b = torch.empty(3), torch.empty(3)
    ws = [dist.isend(inputs[rank][:3].clone(), prv), dist.irecv(a, nxt),
          dist.isend(inputs[rank][3:6].clone(), nxt), dist.irecv(b, prv)]
    check(all(w.wait() for w in ws), "isend/irecv waits")
    check(torch.equal(a, inputs[nxt][:3]) and torch.equal(b, inputs[prv][3:6]), "isend/irecv both ways")
    g = [torch.empty(10) for _ in range(world)] if rank == 1 else None
    dist.gather(inputs[rank].clone(), g, dst=1)
    if rank == 1:
        check(all(torch.equal(a, b) for a, b in zip(g, inputs)), "gather")
    t = torch.empty(10)
    dist.scatter(t, [x.clone() for x in inputs] if rank == 2 else None, src=2)
    check(torch.equal(t, inputs[rank]), "scatter")

    # async Work: not complete before the peers join; complete after wait; future value
    # (the store, not a collective, holds rank 0 back: collectives keep one order)
    store = dist.distributed_c10d._get_default_store()
    t = inputs[rank].clone()
    if rank == 0:
        store.wait(["issued%d" % r for r in range(1, world)])
        w = dist.all_reduce(t, async_op=True)
    else:
        w = dist.all_reduce(t, async_op=True)
        check(not w.is_completed(), "a Work is complete before rank 0 joined its all_reduce")
        store.set("issued%d" % rank, "1")
    fut = w.get_future()
    w.wait()
    check(w.is_completed() and torch.equal(t, total), "async all_reduce")
    check(torch.equal(fut.wait()[0], total), "future value of all_reduce")

    # coalescing manager (what some FSDP paths use)
    a, c = inputs[rank].clone(), inputs[rank].clone() * 2
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(c)
    cm.wait()
    check(torch.equal(a, total) and torch.equal(c, total * 2), "coalesced all_reduce")

    # a subgroup per island: a communicator of its own, native inside one vendor
    islands = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = islands[rank // 2]
    t = inputs[rank].clone()
    dist.all_reduce(t, group=mine)
    pair = inputs[0] + inputs[1] if rank < 2 else inputs[2] + inputs[3]
    check(torch.equal(t, pair), "all_reduce in island subgroup")
    topo = gpubridge.get_topology(mine)
    check(topo["nislands"] == 1 and topo["island_vendor"] == [os.environ["GPUBRIDGE_VENDOR"]],
          "island subgroup topology: %s" % topo)
    topo = gpubridge.get_topology()
    check(topo["nislands"] == 2 and topo["island_vendor"] == ["nvidia", "amd"] and
          topo["island_of_rank"] == [0, 0, 1, 1], "world topology: %s" % topo)

    # direct API on a communicator of its own (unique id through the store)
    if rank == 0:
        store.set("direct_uid", gpubridge.get_unique_id())
    store.wait(["direct_uid"])
    comm = gpubridge.init(rank=rank, world_size=world, unique_id=store.get("direct_uid"), timeout=60)
    t = inputs[rank].clone()
    w = gpubridge.all_reduce(t, op="avg", async_op=True, comm=comm)
    w.wait()
    check(w.is_completed() and torch.allclose(t, total / world), "direct all_reduce avg")
    out = torch.empty(world * 10, dtype=torch.bfloat16)
    gpubridge.all_gather_into_tensor(out, inputs[rank].to(torch.bfloat16))
    check(torch.equal(out, torch.cat(inputs).to(torch.bfloat16)), "direct all_gather bf16")
    o = torch.empty(4)
    gpubridge.reduce_scatter_tensor(o, big[rank].clone(), op=gpubridge.premul_sum(2.0))
    check(torch.equal(o, bsum[4 * rank:4 * rank + 4] * 2), "direct reduce_scatter premul")
    t = inputs[rank].clone()
    gpubridge.broadcast(t, src=3)
    check(torch.equal(t, inputs[3]), "direct broadcast")
    gpubridge.barrier()
    gpubridge.destroy()

    dist.destroy_process_group()
    print("rank %d ok" % rank)


def main():
    gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    out, _ = gbtest.run_ranks(os.path.abspath(__file__), timeout=150)
    gbtest.cleanup(out)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        worker()
    else:
        main()
