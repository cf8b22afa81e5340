"""DDP communication hooks that all-reduce gradient buckets in gpubridge.

    model.register_comm_hook(gpubridge.HookState(op="avg"), gpubridge.ddp_comm_hook)

op "avg": the library divides by the world size (gbAvg); "premul": each
rank's gradient is scaled by factor (default 1/world size) inside the sum
(gbRedOpCreatePreMulSum), as FSDP does. DDP's own default divides in torch
and then sums; the hook leaves every step to the library.

    state = gpubridge.WeightedAvgState(weight=len(x))
    model.register_comm_hook(state, gpubridge.weighted_avg_hook)

weighted_avg_hook averages by weight instead of by rank: each rank's
gradient is the mean over its weight's samples (its local batch, which may
differ from rank to rank), and the result is the mean over the global batch,
sum_r (w_r / W) * g_r with W = sum_r w_r, one PreMulSum all-reduce per
bucket. W is all-reduced once per step (8 bytes, at the step's first
bucket), unless the state was given total=, a number every rank knows.
docs/PYTHON.md and docs/REDUCTION_ORDER.md say why, and what it rounds.
"""
import math

import torch

from . import api
from ._tensors import premul_sum
from ._lib import Error, INVALID_ARGUMENT, INVALID_USAGE


class HookState:
    """What ddp_comm_hook uses: a gpubridge process group or communicator
    (None: the default), op "avg" or "premul", and the premul factor."""

    def __init__(self, process_group=None, op="avg", factor=None):
        if op not in ("avg", "premul"):
            raise Error(INVALID_ARGUMENT, "HookState: op %r is not 'avg' or 'premul'" % (op,))
        self.process_group = process_group
        self.op = op
        self.factor = factor


def ddp_comm_hook(state, bucket):
    """Future of the bucket's averaged gradients."""
    state = state if isinstance(state, HookState) else HookState(state)
    comm = api._resolve(state.process_group, "ddp_comm_hook")
    if state.op == "avg":
        op = "avg"
    else:
        op = premul_sum(state.factor if state.factor is not None else 1.0 / comm.size)
    work = comm.all_reduce(bucket.buffer(), op, call="ddp_comm_hook")
    return work.get_future().then(lambda fut: fut.value()[0])


def _check_weight(call, what, w, zero_ok=True):
    meaning = ("the samples this rank's gradient is the mean of, e.g. its local batch size" if what == "weight"
               else "the sum of every rank's weight")
    try:
        v = float(w)
    except (TypeError, ValueError):
        raise Error(INVALID_ARGUMENT, "%s: %s %r is not a number (%s)" % (call, what, w, meaning)) from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok):
        raise Error(INVALID_ARGUMENT, "%s: %s %r must be a finite number %s 0 (%s)"
                    % (call, what, w, ">=" if zero_ok else ">", meaning))
    return v


class WeightedAvgState:
    """What weighted_avg_hook uses.

    weight: this rank's weight, the number of samples its gradient is the
    mean over (its local batch size); set state.weight again whenever it
    changes (any step; 0 allowed: the rank's gradient counts for nothing).
    total: None (default) all-reduces the weights at every step's first
    bucket; a number, the sum of every rank's weight, skips that all-reduce:
    it must be the same on every rank and stay true (gpubridge.balance's
    sizes give it: their sum). process_group: a gpubridge process group or
    communicator (None: the default). Every rank gives the same total mode."""

    def __init__(self, weight, total=None, process_group=None):
        self.weight = weight
        self.total = total
        self.process_group = process_group
        self.last_total = None  # the W of the last step
        self._factor = None

    @property
    def weight(self):
        return self._weight

    @weight.setter
    def weight(self, w):
        self._weight = _check_weight("WeightedAvgState", "weight", w)

    @property
    def total(self):
        return self._total

    @total.setter
    def total(self, t):
        self._total = None if t is None else _check_weight("WeightedAvgState", "total", t, zero_ok=False)


def _step_total(state, comm, device):
    """W for this step: the all-reduced weights (float64 sum, so integer
    weights add exactly), or the state's fixed total."""
    if state.total is not None:
        return state.total
    t = torch.tensor([state.weight], dtype=torch.float64, device=device)
    comm.all_reduce(t, "sum", call="weighted_avg_hook").wait()
    total = t.item()
    if not total > 0:  # every rank holds the same W, so every rank raises this
        raise Error(INVALID_USAGE, "weighted_avg_hook: the weights of all ranks sum to %r; at least one rank "
                    "needs a weight > 0 (set WeightedAvgState.weight to the rank's local batch size)" % total)
    return total


def weighted_avg_hook(state, bucket):
    """Future of the bucket's weighted average: sum over ranks of
    (weight / W) * gradient, one PreMulSum all-reduce, the same bits on every rank."""
    if not isinstance(state, WeightedAvgState):
        raise Error(INVALID_ARGUMENT, "weighted_avg_hook: the state is a %s; register it with "
                    "gpubridge.WeightedAvgState(weight=local_batch_size)" % type(state).__name__)
    comm = api._resolve(state.process_group, "weighted_avg_hook")
    buf = bucket.buffer()
    if bucket.index() == 0 or state.last_total is None:  # DDP reduces bucket 0 first in every step
        state.last_total = _step_total(state, comm, buf.device)
        state._factor = state.weight / state.last_total
    work = comm.all_reduce(buf, premul_sum(state._factor), call="weighted_avg_hook")
    return work.get_future().then(lambda fut: fut.value()[0])
