"""Calls the gpubridge backend cannot do are refused on the calling rank,
with a message naming the call, before any communication: the odd ranks make
every refused call, the even ranks none, and then a collective of all ranks
still gives the right result (a refused call that had communicated would
have left the ranks out of step)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbAllGather", "gbReduceScatter", "gbSend")


def refused_calls(torch, dist, gpubridge, pg):
    """(call name the message must hold, zero-argument function making the call)."""
    t = torch.ones(4)
    R = dist.ReduceOp

    def opts(op):
        o = dist.AllreduceOptions()
        o.reduceOp = op
        return o
    return [
        ("allreduce", lambda: dist.all_reduce(t.clone(), op=R.BAND)),
        ("allreduce", lambda: dist.all_reduce(t.clone(), op=R.BOR)),
        ("allreduce", lambda: dist.all_reduce(t.clone(), op=R.BXOR)),
        ("allreduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=R.AVG)),
        ("allreduce", lambda: pg.allreduce([torch.ones(4, dtype=torch.complex64)], opts(R.MAX))),
        ("allreduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=R.AVG)),
        ("allreduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.float8_e4m3fnuz))),
        ("allreduce", lambda: dist.all_reduce(torch.ones(4).to_sparse())),
        ("allreduce", lambda: dist.all_reduce(torch.ones(4, device="meta"))),
        ("allreduce", lambda: pg.allreduce([t.clone(), t.clone()], dist.AllreduceOptions())),
        ("recv_anysource", lambda: dist.recv(t.clone())),
        ("monitored_barrier", lambda: pg.monitored_barrier()),
        ("broadcast", lambda: dist.broadcast(t.clone(), src=7)),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.empty(5), t)),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.empty(16, dtype=torch.float64), t)),
        ("allgather", lambda: dist.all_gather([torch.empty(4)] * 3 + [torch.empty(2)], t)),
        ("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(torch.empty(4), torch.empty(15))),
        ("reduce_scatter", lambda: dist.reduce_scatter(torch.empty(4), [torch.empty(4)] * 3)),
        ("all_to_all_single", lambda: dist.all_to_all_single(torch.empty(8), torch.empty(8), [1, 1, 1, 5], [2, 2, 2, 1])),
        ("send", lambda: dist.send(t, dst=9)),
        ("all_reduce", lambda: gpubridge.all_reduce(torch.ones(4, dtype=torch.int64), op="avg")),
        ("all_reduce", lambda: gpubridge.all_reduce(t.clone(), op="band")),
    ]


def worker():
    import datetime

    import torch
    import torch.distributed as dist

    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    if rank % 2 == 1:
        for i, (call, fn) in enumerate(refused_calls(torch, dist, gpubridge, pg)):
            try:
                fn()
            except Exception as e:  # torch's own checks raise ValueError/RuntimeError; gpubridge's Unsupported
                check(call in str(e), "refused call %d (%s) raised a message without its name: %r" % (i, call, e))
                print("refused %-24s %s: %s" % (call, type(e).__name__, str(e).splitlines()[0][:150]))
            else:
                check(False, "call %d (%s) was not refused" % (i, call))
    t = torch.full((6,), float(rank + 1))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((6,), float(sum(range(1, world + 1))))), "all_reduce after refusals: %s" % t)
    dist.destroy_process_group()


def main():
    gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    outdir, results = gbtest.run_ranks(os.path.abspath(__file__), timeout=150)
    gbtest.cleanup(outdir)
    print("\n".join(l for l in results[1][1].splitlines() if l.startswith("refused")))
    print("1 passed, 0 failed")


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        worker()
    else:
        main()
