"""DDP on the gpubridge backend, 4 simulated ranks (nvidia:2 + amd:2):
after several steps every rank's parameters are bit-identical, and equal
(within float tolerance) to the same training on gloo and to a one-process
reference. Ranks start from different weights, so DDP's start-up broadcast
is checked too."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

STEPS = 5
# DDP's start-up checks all-gather shapes; buckets are all-reduced; buffers broadcast.
NEEDS = ("gbAllReduce", "gbBroadcast", "gbAllGather")


def worker():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gbmodels as M
    import gpubridge  # noqa: F401  (registers the backend)
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    out = {}
    for name, pg in (("gpubridge", None), ("gloo", gloo)):
        model = M.make_model(rank)  # a different start on every rank
        ddp = DDP(model, process_group=pg, bucket_cap_mb=0.001)  # several buckets
        start = M.make_model(0)
        check(all(torch.equal(a, b) for a, b in zip(model.parameters(), start.parameters())),
              "%s: DDP's start-up broadcast did not give rank 0's weights" % name)
        opt = torch.optim.SGD(ddp.parameters(), lr=M.LR)
        for s in range(STEPS):
            M.train_step(ddp, opt, *M.batch(s, rank))
        out[name] = {k: v.detach().clone() for k, v in model.named_parameters()}
    torch.save(out, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def main(script=os.path.abspath(__file__), prefix=(), extra_env=None):
    """script: the file whose worker() the ranks run (test_ddp_hosts.py runs this one's)."""
    torch = gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    import gbmodels as M
    outdir, _ = gbtest.run_ranks(script, timeout=240, prefix=prefix, extra_env=extra_env)
    states = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(len(gbtest.VENDORS))]
    gbtest.cleanup(outdir)
    ref = M.reference(STEPS, len(gbtest.VENDORS))
    gb = [s["gpubridge"] for s in states]
    problems = [M.identical("gpubridge DDP", gb),
                M.compare("gpubridge DDP vs gloo DDP", gb[0], states[0]["gloo"]),
                M.compare("gpubridge DDP vs one-process reference", gb[0], ref)]
    if M.compare("start", gb[0], M.reference(0, len(gbtest.VENDORS)), rtol=0, atol=1e-3) is None:
        problems.append("gpubridge DDP: the parameters barely moved from the start; the check is void")
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
