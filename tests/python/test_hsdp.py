"""HSDP on a 2-D DeviceMesh over the gpubridge backend, 4 simulated ranks
(nvidia:2 + amd:2): mesh [[0, 1], [2, 3]] with dims (replicate, shard), so
each shard group is one vendor island (native inside it) and each replicate
group bridges the islands. After several steps the replicas hold
bit-identical shards, every rank's forward output is bit-identical, and the
parameters equal a one-process reference within float tolerance."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

STEPS = 4
NEEDS = ("gbAllReduce", "gbAllGather", "gbReduceScatter")


def worker():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import gbmodels as M
    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    vendor = os.environ["GPUBRIDGE_VENDOR"]
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    shard, rep = mesh.get_group("shard"), mesh.get_group("replicate")
    check(dist.get_process_group_ranks(shard) == [2 * (rank // 2), 2 * (rank // 2) + 1],
          "shard group ranks %s" % dist.get_process_group_ranks(shard))
    ts, tr = gpubridge.get_topology(shard), gpubridge.get_topology(rep)
    check(ts["nislands"] == 1 and ts["island_vendor"] == [vendor] and ts["policy"] == "native",
          "the shard group is not one %s island: %s" % (vendor, ts))
    check(tr["nislands"] == 2 and sorted(tr["island_vendor"]) == ["amd", "nvidia"],
          "the replicate group does not bridge both islands: %s" % tr)

    calls = []
    cls = gpubridge.ProcessGroupGpubridge
    orig_rs, orig_ar = cls.reduce_scatter_single, cls.allreduce

    def rs(self, output, input, opts=None):
        calls.append(("reduce_scatter", self is shard, str(opts.reduceOp.op)))
        return orig_rs(self, output, input, opts)

    def ar(self, tensors, opts=None):
        calls.append(("all_reduce", self is rep, str(opts.reduceOp.op)))
        return orig_ar(self, tensors, opts)
    cls.reduce_scatter_single, cls.allreduce = rs, ar

    model = M.make_model(0)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=M.LR)
    for s in range(STEPS):
        M.train_step(model, opt, *M.batch(s, rank))
    cls.reduce_scatter_single, cls.allreduce = orig_rs, orig_ar
    kinds = {c[0] for c in calls}
    check(kinds == {"reduce_scatter", "all_reduce"}, "HSDP made calls %s" % sorted(kinds))
    check(all(c[1] for c in calls), "a reduce-scatter outside the shard group or an all-reduce outside "
          "the replicate group: %s" % calls)
    check(all(c[2] == "RedOpType.AVG" for c in calls), "ops %s, expected AVG" % sorted({c[2] for c in calls}))
    x0 = torch.randn(3, M.IN, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = model(x0)
    shards = {k: p.to_local().detach().clone() for k, p in model.named_parameters()}
    torch.save({"shards": shards, "y": y}, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def main():
    torch = gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    import gbmodels as M
    world = len(gbtest.VENDORS)
    outdir, _ = gbtest.run_ranks(os.path.abspath(__file__), timeout=240)
    st = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(world)]
    gbtest.cleanup(outdir)
    full = {k: torch.cat([st[0]["shards"][k], st[1]["shards"][k]]) for k in st[0]["shards"]}
    problems = [M.identical("replicas 0 and 2", [st[0]["shards"], st[2]["shards"]]),
                M.identical("replicas 1 and 3", [st[1]["shards"], st[3]["shards"]]),
                M.identical("forward output", [{"y": s["y"]} for s in st]),
                M.compare("HSDP vs one-process reference", full, M.reference(STEPS, world))]
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
