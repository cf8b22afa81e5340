"""gpubridge.ddp_comm_hook: DDP gradient buckets all-reduced by the library
with gbAvg, or with a PreMulSum op (factor 0.5/world, so the update is half
the average's). 4 simulated ranks (nvidia:2 + amd:2): every rank's
parameters bit-identical, equal to a one-process reference within tolerance,
and DDP's own all-reduce never used."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

STEPS = 4
NEEDS = ("gbAllReduce", "gbBroadcast", "gbAllGather", "gbRedOpCreatePreMulSum")
RUNS = {"avg": ("avg", None, 1.0), "premul": ("premul", 0.5, 0.5)}  # op, factor x 1/world, grad scale


def worker():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gbmodels as M
    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    cls = gpubridge.ProcessGroupGpubridge
    orig = cls.allreduce
    pg_allreduces = []

    def spy(self, tensors, opts=None):
        pg_allreduces.append(tensors[0].numel())
        return orig(self, tensors, opts)
    cls.allreduce = spy
    out = {}
    for name, (op, factor, _) in RUNS.items():
        model = M.make_model(rank)
        ddp = DDP(model, bucket_cap_mb=0.001)
        hooked = []

        def hook(state, bucket):
            hooked.append(bucket.buffer().numel())
            return gpubridge.ddp_comm_hook(state, bucket)
        state = gpubridge.HookState(op=op, factor=factor / world if factor else None)
        ddp.register_comm_hook(state, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=M.LR)
        del pg_allreduces[:]
        for s in range(STEPS):
            M.train_step(ddp, opt, *M.batch(s, rank))
        nparams = sum(p.numel() for p in model.parameters())
        check(sum(hooked) == STEPS * nparams, "%s: the hook reduced %d elements, expected %d"
              % (name, sum(hooked), STEPS * nparams))
        check(not pg_allreduces, "%s: DDP all-reduced through the process group: %s" % (name, pg_allreduces))
        out[name] = {k: v.detach().clone() for k, v in model.named_parameters()}
    torch.save(out, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def main():
    torch = gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    import gbmodels as M
    world = len(gbtest.VENDORS)
    outdir, _ = gbtest.run_ranks(os.path.abspath(__file__), timeout=240)
    states = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(world)]
    gbtest.cleanup(outdir)
    problems = []
    for name, (_, _, scale) in RUNS.items():
        got = [s[name] for s in states]
        problems.append(M.identical("hook " + name, got))
        problems.append(M.compare("hook %s vs one-process reference" % name, got[0],
                                  M.reference(STEPS, world, grad_scale=scale)))
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
