"""gpubridge: one collective-communication library for jobs that mix GPU
vendors, from Python.

- gpubridge._lib: ctypes wrappers of every C function (no torch needed).
- With torch installed, `import gpubridge` registers the torch.distributed
  backend "gpubridge" and offers the direct API (init, all_reduce, ...) and
  a DDP communication hook. See docs/PYTHON.md.
"""
import atexit

from ._lib import Error, get_version, has, library_path  # noqa: F401

__version__ = "0.1.0"
__all__ = ["Error", "get_version", "has", "library_path"]

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
    from .backend import BACKEND_NAME, ProcessGroupGpubridge, register as _register  # noqa: F401
    from .hooks import HookState, ddp_comm_hook  # noqa: F401

    __all__ += ["Communicator", "Unsupported", "premul_sum", "Work", "init", "destroy", "is_initialized",
                "get_unique_id", "get_topology", "all_reduce", "reduce", "broadcast", "all_gather_into_tensor",
                "reduce_scatter_tensor", "all_to_all_single", "barrier", "split", "BACKEND_NAME",
                "ProcessGroupGpubridge", "HookState", "ddp_comm_hook"]
    _register()
    atexit.register(_destroy_all)
