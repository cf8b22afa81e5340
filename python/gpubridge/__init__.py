"""gpubridge: one collective-communication library for jobs that mix GPU
vendors, from Python.

- gpubridge._lib: ctypes wrappers of every C function (no torch needed).
- With torch installed, `import gpubridge` registers the torch.distributed
  backend "gpubridge" and offers the direct API (init, all_reduce, ...) and
  DDP communication hooks (ddp_comm_hook; weighted_avg_hook for per-rank
  batches of different sizes, which gpubridge.balance proposes), and the
  flight recorder: observe, in_flight, counters, dump_trace, and the
  staging memory held (memory) (python -m gpubridge.plot draws
  gpubridge-perf --phases output). See docs/PYTHON.md.
- The wheel also carries the C header (include_dir()), the drop-in NCCL ABI
  (drop_in_path()) and the tools gpubridge-run, gpubridge-perf and
  gpubridge-info (console scripts).
"""
import atexit
import os

from . import _lib
from . import balance  # noqa: F401 (needs no torch)
from ._lib import Error, drop_in_path, get_version, get_version_code, has, library_path  # noqa: F401

__all__ = ["balance", "Error", "drop_in_path", "get_version", "get_version_code", "has", "include_dir",
           "library_path"]


def include_dir():
    """The folder holding gpubridge/gpubridge.h inside the installed package (-I for a C build)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
    if not os.path.exists(os.path.join(path, "gpubridge", "gpubridge.h")):
        raise Error(_lib.SYSTEM_ERROR, "this gpubridge package carries no C header (%s is missing): install the wheel "
                    "(pip install .), or use include/ of the source checkout and the build's include/" % path)
    return path


def __getattr__(name):
    # __version__ is the loaded library's version (the file VERSION of its
    # source), read when first asked for, so that importing needs no library.
    if name == "__version__":
        try:
            return get_version()
        except Error as e:
            raise AttributeError("gpubridge.__version__ is the loaded library's version: %s" % e) from e
    raise AttributeError("module 'gpubridge' has no attribute %r" % name)

try:
    import torch.distributed as _dist
    _HAVE_TORCH = _dist.is_available()
except ImportError:
    _HAVE_TORCH = False

if _HAVE_TORCH:
    from ._comm import Communicator, destroy_all as _destroy_all  # noqa: F401
    from ._tensors import Unsupported, premul_sum  # noqa: F401
    from ._work import Work  # noqa: F401
    from .api import (init, destroy, is_initialized, get_unique_id, get_topology,  # noqa: F401
                      all_reduce, reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor,
                      all_to_all_single, barrier, split)
    from .backend import BACKEND_NAME, Options, ProcessGroupGpubridge, register as _register  # noqa: F401
    from .hooks import HookState, WeightedAvgState, ddp_comm_hook, weighted_avg_hook  # noqa: F401
    from ._observe import Observer, counters, dump_trace, in_flight, memory, observe  # noqa: F401

    __all__ += ["Communicator", "Unsupported", "premul_sum", "Work", "init", "destroy", "is_initialized",
                "get_unique_id", "get_topology", "all_reduce", "reduce", "broadcast", "all_gather_into_tensor",
                "reduce_scatter_tensor", "all_to_all_single", "barrier", "split", "BACKEND_NAME",
                "ProcessGroupGpubridge", "HookState", "ddp_comm_hook", "WeightedAvgState",
                "weighted_avg_hook", "Observer", "observe", "in_flight",
                "counters", "dump_trace", "memory", "Options"]
    _register()
    atexit.register(_destroy_all)
