"""The direct API: gpubridge collectives on torch tensors, without
torch.distributed.

    import gpubridge
    gpubridge.init()                    # RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, ...
    gpubridge.all_reduce(t, op="avg")
    gpubridge.destroy()

Every call takes comm=None (the communicator of init(), else the default
gpubridge process group of torch.distributed) and async_op=False; with
async_op=True it returns a Work (wait(), is_completed(), get_future()).
"""
import torch.distributed as dist

from . import _lib
from ._comm import Communicator
from ._lib import Error

_default = None


def init(rank=None, world_size=None, unique_id=None, timeout=None):
    """Makes this process's default communicator and returns it.

    With unique_id (the bytes of get_unique_id(), made on one process and
    shared), rank and world_size: gbCommInitRank. Without: gbCommInitFromEnv
    (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, meeting through
    the agent's store under a real torchrun; Slurm; Open MPI;
    GPUBRIDGE_UNIQUE_ID). timeout in seconds bounds every wait."""
    global _default
    if _default is not None:
        raise Error(_lib.INVALID_USAGE, "gpubridge.init: already initialized; call gpubridge.destroy() first")
    if unique_id is not None:
        if rank is None or world_size is None:
            raise Error(_lib.INVALID_ARGUMENT, "gpubridge.init: a unique_id needs rank and world_size")
        _default = Communicator.from_unique_id(world_size, unique_id, rank, timeout)
    else:
        _default = Communicator.from_env(timeout)
    return _default


def get_unique_id():
    """128 bytes to pass to init(unique_id=...) on every rank."""
    return _lib.get_unique_id()


def destroy(comm=None):
    """Frees the communicator (default: init()'s) once its work finished."""
    global _default
    c = _resolve(comm, "destroy")
    c.destroy()
    if c is _default:
        _default = None


def is_initialized():
    return _default is not None


def _resolve(comm, call):
    if comm is None:
        if _default is not None:
            return _default
        if dist.is_available() and dist.is_initialized():
            comm = dist.distributed_c10d._get_default_group()
        else:
            raise Error(_lib.INVALID_USAGE, "gpubridge.%s: no communicator: call gpubridge.init() or "
                        "init_process_group(backend='gpubridge') first" % call)
    if isinstance(comm, Communicator):
        return comm
    c = getattr(comm, "communicator", None)
    if isinstance(c, Communicator):
        return c
    raise Error(_lib.INVALID_ARGUMENT, "gpubridge.%s: %r is neither a gpubridge communicator nor a "
                "gpubridge process group" % (call, comm))


def get_topology(comm=None):
    """Islands, leaders, vendor per island, run kind (a dict; see gbTopology_t)."""
    return dict(_resolve(comm, "get_topology").topology)


def _issue(comm, call, async_op, fn):
    """fn(communicator)'s Work, or None once waited for (async_op False: on
    the current CUDA stream, as the torch backend does)."""
    c = _resolve(comm, call)
    with c.on_current_stream(not async_op):
        work = fn(c)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op="sum", async_op=False, comm=None):
    """tensor = op over ranks of tensor. op: sum, prod, max, min, avg, or a
    torch ReduceOp (gpubridge.premul_sum(factor) too)."""
    return _issue(comm, "all_reduce", async_op, lambda c: c.all_reduce(tensor, op))


def reduce(tensor, dst, op="sum", async_op=False, comm=None):
    return _issue(comm, "reduce", async_op, lambda c: c.reduce(tensor, dst, op))


def broadcast(tensor, src=0, async_op=False, comm=None):
    return _issue(comm, "broadcast", async_op, lambda c: c.broadcast(tensor, src))


def all_gather_into_tensor(output, input, async_op=False, comm=None):
    """output = the ranks' inputs, concatenated in rank order."""
    return _issue(comm, "all_gather_into_tensor", async_op, lambda c: c.all_gather_into_tensor(output, input))


def reduce_scatter_tensor(output, input, op="sum", async_op=False, comm=None):
    """output = op over ranks of this rank's block of input."""
    return _issue(comm, "reduce_scatter_tensor", async_op, lambda c: c.reduce_scatter_tensor(output, input, op))


def all_to_all_single(output, input, async_op=False, comm=None):
    return _issue(comm, "all_to_all_single", async_op, lambda c: c.all_to_all_single(output, input))


def barrier(async_op=False, comm=None):
    return _issue(comm, "barrier", async_op, lambda c: c.barrier())


def split(color, key=0, comm=None):
    """gbCommSplit: a new communicator of the ranks passing the same color
    (ordered by key), or None for color -1. Every rank of comm calls it."""
    return _resolve(comm, "split").split(color, key)
