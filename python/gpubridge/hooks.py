"""A DDP communication hook that all-reduces gradient buckets in gpubridge.

    model.register_comm_hook(gpubridge.HookState(op="avg"), gpubridge.ddp_comm_hook)

op "avg": the library divides by the world size (gbAvg); "premul": each
rank's gradient is scaled by factor (default 1/world size) inside the sum
(gbRedOpCreatePreMulSum), as FSDP does. DDP's own default divides in torch
and then sums; the hook leaves every step to the library.
"""
from . import api
from ._tensors import premul_sum
from ._lib import Error, INVALID_ARGUMENT


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
