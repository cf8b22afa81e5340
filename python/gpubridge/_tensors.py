"""Torch tensors as gpubridge buffers: data types, reduction ops, layout.

Only views and staging copies happen here; every reduction runs in C.
"""
import torch
import torch.distributed as dist

from . import _lib
from ._lib import Error

RedOpType = dist.ReduceOp.RedOpType

_DTYPES = {
    torch.int8: _lib.INT8, torch.uint8: _lib.UINT8, torch.int32: _lib.INT32,
    torch.int64: _lib.INT64, torch.float16: _lib.FLOAT16, torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64, torch.bfloat16: _lib.BFLOAT16,
}
# float8_e4m3fn and float8_e5m2 are gpubridge's fp8 types bit for bit (the
# "fnuz" variants are not: they move as bytes, and are not reduced).
for _name, _code in (("uint32", _lib.UINT32), ("uint64", _lib.UINT64), ("float8_e4m3fn", _lib.FLOAT8E4M3),
                     ("float8_e5m2", _lib.FLOAT8E5M2)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _code

_OPS = {RedOpType.SUM: "sum", RedOpType.PRODUCT: "prod", RedOpType.MIN: "min",
        RedOpType.MAX: "max", RedOpType.AVG: "avg", RedOpType.PREMUL_SUM: "premul_sum",
        RedOpType.BAND: "band", RedOpType.BOR: "bor", RedOpType.BXOR: "bxor"}
_GB_OPS = {"sum": _lib.SUM, "prod": _lib.PROD, "max": _lib.MAX, "min": _lib.MIN, "avg": _lib.AVG}
# NCCL's meaning of reductions over bool, which it runs as uint8.
_BOOL_OPS = {"sum": "max", "max": "max", "prod": "min", "min": "min"}


class Unsupported(Error):
    """A call or argument gpubridge refuses before any communication."""

    def __init__(self, call, why):
        super().__init__(_lib.INVALID_USAGE, "%s: %s" % (call, why))
        self.call = call


def premul_sum(factor):
    """torch's PREMUL_SUM ReduceOp: sum over ranks of factor * x (factor a float
    or a one-element tensor). ReduceOp.PREMUL_SUM(factor) needs torch 2.13."""
    return dist._make_nccl_premul_sum(factor)


def op_name(op):
    """A torch ReduceOp, RedOpType or name ('sum', 'avg', ...) -> (name, premul factor or None)."""
    if isinstance(op, str):
        name = op.lower()
        if name in ("product",):
            name = "prod"
        return name, None
    kind = op if isinstance(op, RedOpType) else getattr(op, "op", op)
    name = _OPS.get(kind)
    if name is None:
        raise Unsupported("reduce op", "%r is not a reduction gpubridge knows" % (op,))
    if name != "premul_sum":
        return name, None
    factor = getattr(op, "factor", None)
    if factor is None and hasattr(op, "__getstate__"):
        try:  # torch before 2.13 keeps the factor only in the pickled state
            factor = op.__getstate__()[1]
        except Exception:
            factor = None
    if factor is None:
        raise Unsupported("reduce op", "PREMUL_SUM without a factor: make the op with gpubridge.premul_sum(factor)")
    return name, factor


def _check_tensor(call, t, what="tensor"):
    if not isinstance(t, torch.Tensor):
        raise Unsupported(call, "%s is a %s, not a torch.Tensor" % (what, type(t).__name__))
    if t.layout != torch.strided:
        raise Unsupported(call, "%s has layout %s; gpubridge takes dense (strided) tensors" % (what, t.layout))


def device_kind(call, t, run_kind):
    """'host' for CPU tensors of a simulated or CPU rank, 'cuda' for GPU tensors of a real rank."""
    _check_tensor(call, t)
    if t.device.type == "cpu":
        if run_kind == "real":
            raise Unsupported(call, "a CPU tensor on a rank with a real GPU: gpubridge moves device memory; "
                              "move the tensor to the GPU, or use gloo for CPU tensors")
        return "host"
    if t.device.type == "cuda":
        if run_kind != "real":
            raise Unsupported(call, "a %s tensor on a %s rank (GPUBRIDGE_VENDOR set or no GPU): "
                              "simulated ranks take CPU tensors" % (t.device, run_kind))
        return "cuda"
    raise Unsupported(call, "tensors on %s are not supported (cpu for simulated ranks, cuda for GPUs)" % t.device)


def reduce_view(call, t, name):
    """(tensor to hand to C, gb dtype, gb op name) for a reduction over t.

    Complex tensors are reduced as pairs of reals (sum, avg, premul_sum only);
    bool runs as uint8 with NCCL's mapping (sum -> max, prod -> min)."""
    if name in ("band", "bor", "bxor"):
        raise Unsupported(call, "reduce op %s: bitwise reductions are not in gpubridge (NCCL has none); "
                          "use max/min on 0/1 values, or gloo" % name.upper())
    if name not in _GB_OPS and name != "premul_sum":
        raise Unsupported(call, "reduce op %r is not one of sum, prod, max, min, avg, premul_sum" % name)
    dt = t.dtype
    if dt.is_complex:
        if name not in ("sum", "avg", "premul_sum"):
            raise Unsupported(call, "%s over complex %s has no order; use sum, avg or premul_sum" % (name, dt))
        t = torch.view_as_real(t)
        dt = t.dtype
    if dt == torch.bool:
        if name not in _BOOL_OPS:
            raise Unsupported(call, "%s over bool is undefined; use sum (any), prod (all), max or min" % name)
        return t.view(torch.uint8), _lib.UINT8, _BOOL_OPS[name]
    code = _DTYPES.get(dt)
    if code is None:
        raise Unsupported(call, "dtype %s cannot be reduced by gpubridge (int8, uint8, int32, uint32, int64, "
                          "uint64, float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2)" % dt)
    if name in ("avg", "premul_sum") and not dt.is_floating_point:
        raise Unsupported(call, "%s over %s: an integer average needs a rounding rule; use sum and divide, "
                          "or a float type" % (name, dt))
    return t, code, name


def move_view(t):
    """(tensor, gb dtype) to move t's bytes unchanged: its own type, else bytes."""
    if t.dtype.is_complex:
        t = torch.view_as_real(t)
    code = _DTYPES.get(t.dtype)
    if code is not None:
        return t, code
    if t.dtype == torch.bool or t.element_size() == 1:
        return t.view(torch.uint8), _lib.UINT8
    return t.reshape(-1).view(torch.uint8), _lib.UINT8


def gb_op_code(name):
    return _GB_OPS[name]


def contiguous_in(t):
    """t itself when dense, else a dense copy (read when the call is issued)."""
    return t if t.is_contiguous() else t.contiguous()


def contiguous_out(t, post):
    """A dense tensor to receive into; when t is not dense, a staging copy
    that post[] copies back into t once the call finished."""
    if t.is_contiguous():
        return t
    tmp = t.contiguous()  # keeps the current values, for in-place calls
    post.append(lambda: t.copy_(tmp))
    return tmp


def same_shape(call, a, b, what):
    if a.dtype != b.dtype:
        raise Unsupported(call, "%s: dtypes differ (%s and %s)" % (what, a.dtype, b.dtype))
    if a.device != b.device:
        raise Unsupported(call, "%s: devices differ (%s and %s)" % (what, a.device, b.device))


def one_tensor(call, tensors):
    """The single tensor of a per-device list (gpubridge drives one device per process)."""
    if len(tensors) != 1:
        raise Unsupported(call, "takes one tensor per process (one device per rank), got %d" % len(tensors))
    return tensors[0]
