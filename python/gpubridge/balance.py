"""Per-rank batch sizes matched to each rank's speed.

Islands of different GPU models run a step at different speeds; with the
same batch everywhere the fast ones wait. balance_batch() times this rank's
step, gathers every rank's time, and proposes batch sizes proportional to
each rank's speed (samples per second) that add up to the global batch:

    sizes = gpubridge.balance.balance_batch(step, batch_size, global_batch)
    b = sizes[rank]                    # the same list on every rank
    state = gpubridge.WeightedAvgState(weight=b, total=global_batch)

step() runs one step at batch_size and must not communicate (forward and
backward of the module DDP wraps, ddp.module): a DDP step waits for the
slowest rank, so its time says nothing of this rank's speed.
propose_batch_sizes() is the arithmetic alone: exact (fractions), so every
rank that gives it the same times gets the same sizes.
"""
import time
from fractions import Fraction

from ._lib import Error, INVALID_ARGUMENT


def _number(what, v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: %s %r is not a number" % (what, v)) from None
    if f != f or f in (float("inf"), float("-inf")) or f <= 0:
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: %s %r must be a finite number > 0" % (what, v))
    return f


def propose_batch_sizes(step_times, batch_sizes, global_batch, min_size=1):
    """Batch sizes, one per rank, summing to global_batch, proportional to
    rank r's speed batch_sizes[r] / step_times[r] (a step's time taken as
    proportional to its batch; call again with the new sizes to refine).

    Each rank's exact share global_batch * speed_r / sum(speeds) is rounded
    down, and the samples left go one each to the ranks with the largest
    remainders (ties: the lower rank). A rank whose share is below min_size
    gets min_size, and the others share what is left the same way."""
    n = len(step_times)
    if n == 0 or len(batch_sizes) != n:
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: %d step times and %d batch sizes; give one of each per "
                    "rank" % (n, len(batch_sizes)))
    if not all(isinstance(v, (int, float)) and v == int(v) for v in (global_batch, min_size)) or min_size < 0:
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: global_batch %r and min_size %r must be whole numbers"
                    % (global_batch, min_size))
    global_batch, min_size = int(global_batch), int(min_size)
    if global_batch < n * min_size:
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: a global batch of %d cannot give %d ranks %d sample(s) "
                    "each; raise global_batch or lower min_size" % (global_batch, n, min_size))
    speeds = [Fraction(_number("batch size of rank %d" % r, b)) / Fraction(_number("step time of rank %d" % r, t))
              for r, (t, b) in enumerate(zip(step_times, batch_sizes))]
    # Ranks whose share is below min_size get min_size; the others share the
    # rest in proportion, again until no share is below (some rank always
    # remains, as global_batch >= n * min_size).
    floor = set()
    while True:
        free = [r for r in range(n) if r not in floor]
        left = global_batch - min_size * len(floor)
        total = sum(speeds[r] for r in free)
        shares = {r: left * speeds[r] / total for r in free}
        low = [r for r in free if shares[r] < min_size]
        if not low:
            break
        floor.update(low)
    sizes = [min_size if r in floor else int(shares[r]) for r in range(n)]  # int(): the floor of a Fraction >= 0
    rest = global_batch - sum(sizes)
    order = sorted(free, key=lambda r: (-(shares[r] - int(shares[r])), r))
    for r in order[:rest]:
        sizes[r] += 1
    return sizes


def time_step(step, steps=3, warmup=1, clock=time.perf_counter, sync=None):
    """The median time of steps calls of step() after warmup calls. sync():
    called before each clock read (default: torch.cuda.synchronize when CUDA
    is in use), so queued GPU work is counted."""
    if int(steps) != steps or steps < 1 or int(warmup) != warmup or warmup < 0:
        raise Error(INVALID_ARGUMENT, "gpubridge.balance: steps %r must be >= 1 and warmup %r >= 0" % (steps, warmup))
    if sync is None:
        sync = _cuda_sync()
    for _ in range(int(warmup)):
        step()
    times = []
    for _ in range(int(steps)):
        sync()
        t0 = clock()
        step()
        sync()
        times.append(clock() - t0)
    times.sort()
    k = len(times)
    return times[k // 2] if k % 2 else (times[k // 2 - 1] + times[k // 2]) / 2


def _cuda_sync():
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.synchronize
    except ImportError:
        pass
    return lambda: None


def _as_float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")  # refused after the gather, by every rank alike


def gather(values, comm=None):
    """Every rank's values (a list of k numbers, the same k on every rank),
    as a list in rank order of lists, through one float64 all-gather on the
    communicator (None: the default). Every rank calls it."""
    import torch

    from . import api
    c = api._resolve(comm, "balance")
    device = torch.device("cuda", torch.cuda.current_device()) if c.run_kind == "real" else torch.device("cpu")
    mine = torch.tensor([_as_float(v) for v in values], dtype=torch.float64, device=device)
    out = torch.empty(c.size * mine.numel(), dtype=torch.float64, device=device)
    c.all_gather_into_tensor(out, mine, call="balance").wait()
    return out.view(c.size, -1).cpu().tolist()


def balance_batch(step, batch_size, global_batch, steps=3, warmup=1, min_size=1, comm=None,
                  clock=time.perf_counter, sync=None):
    """Times step() (this rank at batch_size), gathers every rank's time and
    batch size, and returns propose_batch_sizes() of them: every rank's new
    batch size, a list in rank order, the same on every rank. Every rank
    calls it, with the same global_batch and min_size."""
    seconds = time_step(step, steps, warmup, clock, sync)
    rows = gather([seconds, batch_size], comm)
    return propose_batch_sizes([r[0] for r in rows], [r[1] for r in rows], global_batch, min_size)
