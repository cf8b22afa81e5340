"""The gpubridge backend on real GPUs (skips without a CUDA GPU): 2 ranks,
one GPU each (with one GPU, both on it as two split-test islands), CUDA
tensors on torch's streams. Collectives are checked
against values each rank computes itself; an async Work is incomplete until
the peer joins and its wait() orders the current stream; DDP trains to
bit-identical parameters equal to a one-process reference."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbBroadcast", "gbAllGather", "gbReduceScatter", "gbRedOpCreatePreMulSum")
STEPS = 4


def worker():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gbmodels as M
    import gpubridge
    from gbtest import check

    rank = int(os.environ["RANK"])
    gpu = rank % torch.cuda.device_count()  # one GPU: both ranks on it, split-test islands
    torch.cuda.set_device(gpu)
    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    world = dist.get_world_size()
    topo = gpubridge.get_topology()
    check(topo["run_kind"] == "real", "run kind %s, expected real" % topo["run_kind"])
    dev = torch.device("cuda", gpu)
    ins = [torch.arange(8, dtype=torch.float32, device=dev) * (r + 1) for r in range(world)]
    total = sum(ins)
    t = ins[rank].clone()
    dist.all_reduce(t)
    check(torch.equal(t, total), "all_reduce sum")
    t = ins[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.allclose(t, total / world), "all_reduce avg")
    t = ins[rank].clone()
    dist.broadcast(t, src=1)
    check(torch.equal(t, ins[1]), "broadcast")
    out = torch.empty(8 * world, device=dev)
    dist.all_gather_into_tensor(out, ins[rank])
    check(torch.equal(out, torch.cat(ins)), "all_gather_into_tensor")
    o = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(o, ins[rank].clone(), op=gpubridge.premul_sum(0.5))
    check(torch.allclose(o, total[4 * rank:4 * rank + 4] * 0.5), "reduce_scatter premul")
    t = ins[rank].clone()
    dist.all_reduce(t, op=gpubridge.premul_sum(torch.tensor([0.25], device=dev)))  # scalar on the GPU
    check(torch.allclose(t, total * 0.25), "all_reduce premul with a device scalar")

    # An async Work on a side stream: incomplete until the peer joins (the
    # store holds rank 0 back); wait() makes the current stream wait for it.
    store = dist.distributed_c10d._get_default_store()
    t = ins[rank].clone()
    if rank == 0:
        store.wait(["issued"])
        w = dist.all_reduce(t, async_op=True)
    else:
        w = dist.all_reduce(t, async_op=True)
        check(not w.is_completed(), "a Work is complete before rank 0 joined")
        store.set("issued", "1")
    w.wait()
    doubled = t * 2  # on the current stream, after the wait
    check(torch.equal(doubled, total * 2), "after wait(): %s" % doubled)
    torch.cuda.synchronize()
    check(w.is_completed(), "Work incomplete after the stream synchronized")

    # A synchronous call runs on the caller's current stream (as
    # ProcessGroupNCCL's): on a user stream whose kernel before it still runs
    # (torch.cuda._sleep) and whose work after it reads the result, with no
    # other synchronization; the same through gpubridge's own API.
    user = torch.cuda.Stream()
    with torch.cuda.stream(user):
        t = torch.zeros(1 << 16, device=dev)
        torch.cuda._sleep(20_000_000)
        t.fill_(rank + 1)
        dist.all_reduce(t)
        after = t * 2
        u = torch.zeros(1 << 16, device=dev)
        torch.cuda._sleep(20_000_000)
        u.fill_(rank + 2)
        gpubridge.all_reduce(u, op="max")
        after_u = u + 1
    user.synchronize()
    want = float(sum(r + 1 for r in range(world)))
    check(torch.equal(after, torch.full_like(after, 2 * want)), "sync all_reduce on a user stream: %s" % after[:4])
    check(torch.equal(after_u, torch.full_like(after_u, world + 2.0)),
          "gpubridge.all_reduce on a user stream: %s" % after_u[:4])

    model = M.make_model(rank).to(dev)
    ddp = DDP(model, device_ids=[gpu])
    opt = torch.optim.SGD(ddp.parameters(), lr=M.LR)
    for s in range(STEPS):
        x, y = M.batch(s, rank)
        M.train_step(ddp, opt, x.to(dev), y.to(dev))
    state = {k: v.detach().cpu() for k, v in model.named_parameters()}
    torch.save(state, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def main():
    torch = gbtest.require_torch()
    if not torch.cuda.is_available():
        gbtest.skip("needs a CUDA GPU (torch sees none)")
    gbtest.require_library(*NEEDS)
    import gbmodels as M
    # One GPU: NCCL refuses two ranks of one island on it, so each rank is its
    # own island (split-test) and the bridge joins them.
    extra = {"GPUBRIDGE_SPLIT_TEST": "half"} if torch.cuda.device_count() < 2 else None
    outdir, _ = gbtest.run_ranks(os.path.abspath(__file__), vendors=(None, None), timeout=300, extra_env=extra)
    states = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(2)]
    gbtest.cleanup(outdir)
    problems = [M.identical("DDP on GPUs", states),
                M.compare("DDP on GPUs vs one-process reference", states[0], M.reference(STEPS, 2),
                          rtol=1e-4, atol=1e-5)]
    problems = [p for p in problems if p]
    if problems:
        gbtest.fail("; ".join(problems))
    print("1 passed, 0 failed")


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        worker()
    else:
        main()
