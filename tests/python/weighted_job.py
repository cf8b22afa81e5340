"""The job of test_weighted_avg.py (simulated islands, CPU) and
test_gpu_weighted_avg.py (real GPUs): DDP with per-rank batches of
different sizes, averaged by gpubridge.weighted_avg_hook, against one
process training on each step's whole global batch.

Each rank first runs gpubridge.balance.balance_batch with a synthetic clock
(rank r's step costs COSTS[r] per sample), which must propose SIZES on every
rank. Then every run trains STEPS steps from rank 0's model, the last step
on a smaller global batch (LAST_SIZES), so the weights change mid-run."""
import os

# Per-sample step costs whose speeds 1/cost are 5 : 11 : 16 (and 5 : 11 for two ranks).
COSTS = {3: (1 / 5, 1 / 11, 1 / 16), 2: (1 / 5, 1 / 11)}
SIZES = {3: (5, 11, 16), 2: (5, 11)}
LAST_SIZES = {3: (3, 7, 2), 2: (3, 7)}
STEPS = 4
# run -> (dtype, hook, fixed total); "avg" is the equal-weight hook, which must miss the reference.
RUNS = {"f64": ("float64", "weighted", False), "f32": ("float32", "weighted", False),
        "f64_total": ("float64", "weighted", True), "avg": ("float64", "avg", False)}
# Tolerance against the one-process reference (the sums differ only in order).
TOL = {"float64": (1e-12, 1e-14), "float32": (1e-5, 1e-6)}


def step_sizes(world, step, fixed):
    return SIZES[world] if fixed or step < STEPS - 1 else LAST_SIZES[world]


def global_batch(step, n, dtype):
    import torch

    import gbmodels as M
    g = torch.Generator().manual_seed(7919 * step + n)
    x, y = torch.randn(n, M.IN, generator=g, dtype=torch.float64), torch.randn(n, M.OUT, generator=g,
                                                                                dtype=torch.float64)
    return x.to(getattr(torch, dtype)), y.to(getattr(torch, dtype))


def local_batch(step, rank, sizes, dtype):
    x, y = global_batch(step, sum(sizes), dtype)
    a = sum(sizes[:rank])
    return x[a:a + sizes[rank]], y[a:a + sizes[rank]]


def reference(world, dtype, fixed):
    """Parameters after one-process training on every step's global batch."""
    import torch

    import gbmodels as M
    model = M.make_model(0).to(getattr(torch, dtype))
    opt = torch.optim.SGD(model.parameters(), lr=M.LR)
    for s in range(STEPS):
        M.train_step(model, opt, *global_batch(s, sum(step_sizes(world, s, fixed)), dtype))
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def worker(device):
    """One rank: the balance check, every run, the refusals; saves rank<r>.pt."""
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gbmodels as M
    import gbtest
    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()

    now = [0.0]
    sizes = gpubridge.balance.balance_batch(lambda: now.__setitem__(0, now[0] + 8 * COSTS[world][rank]),
                                            8, sum(SIZES[world]), clock=lambda: now[0], sync=lambda: None)
    check(tuple(sizes) == SIZES[world], "balance_batch proposed %s, expected %s" % (sizes, SIZES[world]))

    out = {}
    for name, (dtype, hook, fixed) in RUNS.items():
        model = M.make_model(rank).to(device=device, dtype=getattr(torch, dtype))
        ddp = DDP(model, bucket_cap_mb=0.001, device_ids=[device.index] if device.type == "cuda" else None)
        firsts = []
        if hook == "weighted":
            state = gpubridge.WeightedAvgState(weight=sizes[rank], total=sum(sizes) if fixed else None)

            def counted(st, bucket):
                firsts.append(bucket.index() == 0)
                return gpubridge.weighted_avg_hook(st, bucket)
            ddp.register_comm_hook(state, counted)
        else:
            ddp.register_comm_hook(gpubridge.HookState(op="avg"), gpubridge.ddp_comm_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=M.LR)
        for s in range(STEPS):
            now_sizes = step_sizes(world, s, fixed)
            if hook == "weighted":
                state.weight = now_sizes[rank]
            x, y = local_batch(s, rank, now_sizes, dtype)
            M.train_step(ddp, opt, x.to(device), y.to(device))
        if hook == "weighted":
            check(sum(firsts) == STEPS and len(firsts) > STEPS,
                  "%s: %d bucket calls, %d of them bucket 0, over %d steps" % (name, len(firsts), sum(firsts), STEPS))
            want = sum(step_sizes(world, STEPS - 1, fixed))
            check(state.last_total == want, "%s: the last step's total weight is %r, expected %r"
                  % (name, state.last_total, want))
        out[name] = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
    refusals(device)
    torch.save(out, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def refusals(device):
    """Weights refused where they are set; all weights 0 fails every rank alike."""
    import torch

    import gpubridge
    from gbtest import check

    def error_of(fn):
        try:
            fn()
        except gpubridge.Error as e:
            return str(e)
        return None
    for bad in (-1, float("nan"), float("inf"), "five"):
        e = error_of(lambda: gpubridge.WeightedAvgState(weight=bad))
        check(e and "weight" in e and "local batch size" in e, "weight %r: %s" % (bad, e))
    e = error_of(lambda: gpubridge.WeightedAvgState(weight=1, total=0))
    check(e and "total 0" in e, "total 0: %s" % e)

    class Bucket:
        def index(self):
            return 0

        def buffer(self):
            return torch.ones(3, device=device)
    e = error_of(lambda: gpubridge.weighted_avg_hook(gpubridge.HookState(), Bucket()))
    check(e and "WeightedAvgState" in e, "a HookState given to weighted_avg_hook: %s" % e)
    e = error_of(lambda: gpubridge.weighted_avg_hook(gpubridge.WeightedAvgState(weight=0), Bucket()))
    check(e and "sum to 0.0" in e and "at least one rank" in e, "every weight 0: %s" % e)


def check_states(states):
    """Problems (strings) of the ranks' saved runs against the reference."""
    import gbmodels as M
    world = len(states)
    problems = []
    for name, (dtype, hook, fixed) in RUNS.items():
        got = [s[name] for s in states]
        problems.append(M.identical(name, got))
        rtol, atol = TOL[dtype]
        want = reference(world, dtype, fixed)
        miss = M.compare(name, got[0], want, rtol=rtol, atol=atol)
        print("%s: largest difference from the one-process reference %.3g" % (
            name, max((got[0][k] - want[k]).abs().max().item() for k in want)))
        if hook == "avg":  # an equal-weight average of unequal batches is not the global batch's mean
            problems.append(None if miss else "avg: equal weights matched the reference: the test cannot tell")
        else:
            problems.append(miss)
    return [p for p in problems if p]


def run_and_check(test_file, vendors, timeout, extra_env=None):
    """The driver of both tests: runs test_file's workers on len(vendors) ranks,
    loads what each saved and fails the suite on any problem."""
    import torch
    import gbtest
    outdir, _ = gbtest.run_ranks(os.path.abspath(test_file), vendors=vendors, timeout=timeout, extra_env=extra_env)
    states = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(len(vendors))]
    gbtest.cleanup(outdir)
    problems = check_states(states)
    if problems:
        gbtest.fail("; ".join(problems))
    print("1 passed, 0 failed")
