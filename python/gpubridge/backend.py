"""The torch.distributed backend "gpubridge".

`import gpubridge` registers it; then
    torch.distributed.init_process_group(backend="gpubridge")
makes a process group over a gpubridge communicator. Rank 0 makes the unique
id and shares it through the store torch hands the backend (env:// and
torchrun work as with NCCL). new_group and DeviceMesh subgroups get a
communicator of their own, made the same way from the subgroup's store.

What DDP, FSDP2 and DeviceMesh call is implemented; a call gpubridge cannot
do raises gpubridge.Unsupported naming the call, before any communication.
"""
import datetime
import functools

import torch
import torch.distributed as dist

from . import _lib
from . import _tensors as T
from ._comm import Communicator
from ._lib import Error
from ._p2p import P2pQueue
from ._tensors import Unsupported

BACKEND_NAME = "gpubridge"


def _op(opts):
    """The reduce op of an options object, or of a bare ReduceOp."""
    if opts is None:
        return dist.ReduceOp.SUM
    if isinstance(opts, (dist.ReduceOp, dist.ReduceOp.RedOpType)):
        return opts
    return opts.reduceOp


def _stream_from_opts(method):
    """torch's async_op=False (opts.asyncOp False) puts the call on the
    caller's current CUDA stream (Communicator.on_current_stream), as
    ProcessGroupNCCL does; not while coalescing, whose closing Work covers
    every call of the batch on the communicator's stream."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        opts = kwargs.get("opts", args[-1] if args else None)
        if getattr(opts, "asyncOp", True) is False and self._coalescing is None:
            with self.communicator.on_current_stream():
                return method(self, *args, **kwargs)
        return method(self, *args, **kwargs)
    return call


class Options:
    """A gpubridge process group's own settings, given as pg_options to
    dist.new_group or dist.init_process_group (backend "gpubridge").

    bridge_compression: "off", "bf16" or "fp8" (None: GPUBRIDGE_BRIDGE_COMPRESSION):
    floating-point all-reduces and reduce-scatters of this group cross the
    bridge narrowed (docs/REDUCTION_ORDER.md, "Bridge compression"). Every
    rank of the group must give the same."""

    def __init__(self, bridge_compression=None):
        if bridge_compression is not None and bridge_compression not in _lib.COMPRESSIONS:
            raise Error(_lib.INVALID_ARGUMENT, "gpubridge.Options(bridge_compression=%r): give one of %s" % (
                bridge_compression, ", ".join(_lib.COMPRESSIONS)))
        self.bridge_compression = bridge_compression

    def __repr__(self):
        return "gpubridge.Options(bridge_compression=%r)" % (self.bridge_compression,)


class ProcessGroupGpubridge(dist.ProcessGroup):
    """A process group whose collectives run in libgpubridge."""

    def __init__(self, store, rank, size, timeout, options=None):
        super().__init__(rank, size)
        if isinstance(timeout, datetime.timedelta):
            timeout_s = timeout.total_seconds()
        else:
            timeout_s = float(timeout) if timeout else None
        self._timeout_s = timeout_s
        if options is not None and not isinstance(options, Options):
            raise TypeError("pg_options for backend %r must be a gpubridge.Options, not %s" % (
                BACKEND_NAME, type(options).__name__))
        self.options = options or Options()
        self.communicator = Communicator.from_store(store, rank, size, timeout_s,
                                                    compression=self.options.bridge_compression)
        self._p2p = P2pQueue(self.communicator)
        self._coalescing = None

    def getBackendName(self):
        return BACKEND_NAME

    # A Python process group has no c10d backend to keep its name and
    # description (group_name, which DeviceMesh and DTensor look groups up by).
    _name = ""
    _desc = ""

    def getGroupName(self):
        return self._name

    def setGroupName(self, name):
        self._name = name

    def getGroupDesc(self):
        return self._desc

    def setGroupDesc(self, desc):
        self._desc = desc

    def _track(self, work):
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def _after(self, call, tensors, kind_tensor):
        """A Work complete once every call issued before it is (same stream)."""
        c = self.communicator
        kind = c._kind(call, kind_tensor) if kind_tensor is not None else (
            "cuda" if c.run_kind == "real" else "host")
        return c.submit(call, kind, lambda stream: None, tensors)

    # ------------------------------------------------------- reductions

    @_stream_from_opts
    def allreduce(self, tensors, opts=None):
        t = T.one_tensor("allreduce", tensors)
        return self._track(self.communicator.all_reduce(t, _op(opts), call="allreduce"))

    @_stream_from_opts
    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            raise Unsupported("allreduce_coalesced", "no tensors")
        op = _op(opts)
        for t in tensors:
            self.communicator.all_reduce(t, op, call="allreduce_coalesced")
        return self._track(self._after("allreduce_coalesced", list(tensors), tensors[0]))

    @_stream_from_opts
    def reduce(self, tensors, opts=None):
        t = T.one_tensor("reduce", tensors)
        if getattr(opts, "rootTensor", 0) != 0:
            raise Unsupported("reduce", "rootTensor must be 0 (one tensor per process)")
        return self._track(self.communicator.reduce(t, opts.rootRank, _op(opts)))

    @_stream_from_opts
    def reduce_scatter_single(self, output, input, opts=None):
        return self._track(self.communicator.reduce_scatter_tensor(output, input, _op(opts),
                                                                  call="reduce_scatter_tensor"))

    def _reduce_scatter_base(self, *args, **kwargs):
        """Older torch's name of reduce_scatter_single."""
        return self.reduce_scatter_single(*args, **kwargs)

    @_stream_from_opts
    def reduce_scatter(self, outputs, input_lists, opts=None):
        call = "reduce_scatter"
        out = T.one_tensor(call, outputs)
        inputs = T.one_tensor(call, input_lists)
        self._equal_parts(call, out, inputs)
        flat = torch.cat([t.reshape(-1) for t in inputs]) if inputs else out.new_empty(0)
        return self._track(self.communicator.reduce_scatter_tensor(out.reshape(-1) if out.is_contiguous()
                                                                   else out, flat, _op(opts), call=call))

    @_stream_from_opts
    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        call = "reduce_scatter_tensor_coalesced"
        if len(outputs) != len(inputs) or not outputs:
            raise Unsupported(call, "needs as many outputs as inputs (got %d and %d)" % (len(outputs), len(inputs)))
        for o, i in zip(outputs, inputs):
            self.communicator.reduce_scatter_tensor(o, i, _op(opts), call=call)
        return self._track(self._after(call, list(outputs), outputs[0]))

    def reduce_scatter_tensor_coalesced(self, *args, **kwargs):
        """Older torch's name of reduce_scatter_single_coalesced."""
        return self.reduce_scatter_single_coalesced(*args, **kwargs)

    # ---------------------------------------------------- data movement

    @_stream_from_opts
    def broadcast(self, tensors, opts=None):
        t = T.one_tensor("broadcast", tensors)
        if opts is not None and getattr(opts, "rootTensor", 0) != 0:
            raise Unsupported("broadcast", "rootTensor must be 0 (one tensor per process)")
        root = opts.rootRank if opts is not None else 0
        return self._track(self.communicator.broadcast(t, root))

    @_stream_from_opts
    def all_gather_single(self, output, input, opts=None):
        return self._track(self.communicator.all_gather_into_tensor(output, input,
                                                                   call="all_gather_into_tensor"))

    def _allgather_base(self, *args, **kwargs):
        """Older torch's name of all_gather_single."""
        return self.all_gather_single(*args, **kwargs)

    @_stream_from_opts
    def allgather(self, output_lists, input_tensors, opts=None):
        call = "allgather"
        inp = T.one_tensor(call, input_tensors)
        outs = T.one_tensor(call, output_lists)
        self._equal_parts(call, inp, outs)
        c = self.communicator
        flat = torch.empty((c.size * inp.numel(),), dtype=inp.dtype, device=inp.device)
        # The gathered rows land in the caller's list once the call finished.
        then = [lambda: [o.copy_(f.view_as(o)) for o, f in zip(outs, flat.chunk(c.size))]]
        return self._track(c.all_gather_into_tensor(flat, inp, call=call, then=then, result=[list(outs)]))

    @_stream_from_opts
    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        call = "allgather_into_tensor_coalesced"
        if len(outputs) != len(inputs) or not outputs:
            raise Unsupported(call, "needs as many outputs as inputs (got %d and %d)" % (len(outputs), len(inputs)))
        for o, i in zip(outputs, inputs):
            self.communicator.all_gather_into_tensor(o, i, call=call)
        return self._track(self._after(call, list(outputs), outputs[0]))

    def allgather_into_tensor_coalesced(self, *args, **kwargs):
        """Older torch's name of all_gather_single_coalesced."""
        return self.all_gather_single_coalesced(*args, **kwargs)

    @_stream_from_opts
    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        call = "allgather_coalesced"
        if len(output_lists) != len(input_tensors) or not input_tensors:
            raise Unsupported(call, "needs one output list per input")
        for outs, inp in zip(output_lists, input_tensors):
            self.allgather([outs], [inp])
        return self._track(self._after(call, output_lists, input_tensors[0]))

    @_stream_from_opts
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        call = "all_to_all_single"
        c = self.communicator
        if not output_split_sizes and not input_split_sizes:
            return self._track(c.all_to_all_single(output, input, call=call))
        ins = self._split(call, input, input_split_sizes, "input")
        outs = self._split(call, output, output_split_sizes, "output")
        return self._track(self._exchange(call, outs, ins, [output]))

    def alltoall_base(self, *args, **kwargs):
        """Older torch's name of all_to_all_single."""
        return self.all_to_all_single(*args, **kwargs)

    @_stream_from_opts
    def alltoall(self, output_tensors, input_tensors, opts=None):
        call = "alltoall"
        c = self.communicator
        if len(output_tensors) != c.size or len(input_tensors) != c.size:
            raise Unsupported(call, "needs world size (%d) input and output tensors, got %d and %d"
                              % (c.size, len(input_tensors), len(output_tensors)))
        return self._track(self._exchange(call, list(output_tensors), list(input_tensors), list(output_tensors)))

    def _exchange(self, call, outs, ins, result):
        """Rank r's ins[p] goes to rank p's outs[r]: one group of sends and receives."""
        c = self.communicator
        me = c.rank
        for o, i in zip(outs, ins):
            T.same_shape(call, o, i, "output and input")
        if outs[me].numel() != ins[me].numel():
            raise Unsupported(call, "this rank sends itself %d elements but receives %d"
                              % (ins[me].numel(), outs[me].numel()))
        outs[me].copy_(ins[me])
        sends = [(ins[p], p) for p in range(c.size) if p != me]
        recvs = [(outs[p], p) for p in range(c.size) if p != me]
        work = c.send_recv(sends, recvs, call)
        work._result = result
        return work

    def _split(self, call, t, sizes, what):
        c = self.communicator
        if not sizes:
            if t.shape[0] % c.size:
                raise Unsupported(call, "%s's first dimension %d is not divisible by the world size %d"
                                  % (what, t.shape[0], c.size))
            sizes = [t.shape[0] // c.size] * c.size
        if len(sizes) != c.size or sum(sizes) != t.shape[0]:
            raise Unsupported(call, "%s split sizes %s do not cover its first dimension %d in %d parts"
                              % (what, list(sizes), t.shape[0], c.size))
        return list(t.split(list(sizes)))

    @_stream_from_opts
    def gather(self, output_lists, input_tensors, opts=None):
        call = "gather"
        c = self.communicator
        inp = T.one_tensor(call, input_tensors)
        root = opts.rootRank
        c._check_root(call, root)
        if c.rank != root:
            return self._track(c.send_recv([(inp, root)], [], call))
        outs = T.one_tensor(call, output_lists)
        self._equal_parts(call, inp, outs)
        outs[root].copy_(inp)
        work = c.send_recv([], [(outs[p], p) for p in range(c.size) if p != root], call)
        work._result = [list(outs)]
        return self._track(work)

    @_stream_from_opts
    def scatter(self, output_tensors, input_lists, opts=None):
        call = "scatter"
        c = self.communicator
        out = T.one_tensor(call, output_tensors)
        root = opts.rootRank
        c._check_root(call, root)
        if c.rank != root:
            return self._track(c.send_recv([], [(out, root)], call))
        ins = T.one_tensor(call, input_lists)
        self._equal_parts(call, out, ins)
        out.copy_(ins[root])
        work = c.send_recv([(ins[p], p) for p in range(c.size) if p != root], [], call)
        work._result = [out]
        return self._track(work)

    # Held and fused with the next ones (_p2p.py): torch issues a batch one call at a time.
    def send(self, tensors, dst, tag=0):
        t = T.one_tensor("send", tensors)
        self.communicator.check_p2p("send", t, dst)
        return self._track(self._p2p.add(True, t, dst))

    def recv(self, tensors, src, tag=0):
        t = T.one_tensor("recv", tensors)
        self.communicator.check_p2p("recv", t, src)
        return self._track(self._p2p.add(False, t, src))

    def recv_anysource(self, tensors, tag=0):
        raise Unsupported("recv_anysource", "gpubridge receives only from a named peer (as NCCL); "
                          "pass src to recv")

    @_stream_from_opts
    def barrier(self, opts=None):
        return self._track(self.communicator.barrier())

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        raise Unsupported("monitored_barrier", "only the gloo backend has it; use barrier, whose wait "
                          "fails after the group's timeout")

    def _equal_parts(self, call, t, parts):
        c = self.communicator
        if len(parts) != c.size:
            raise Unsupported(call, "needs world size (%d) tensors in the list, got %d" % (c.size, len(parts)))
        for p in parts:
            if p.shape != t.shape or p.dtype != t.dtype or p.device != t.device:
                raise Unsupported(call, "list tensors of different shapes or types (an all_gather_v / "
                                  "reduce_scatter_v) are not supported: each must be %s %s" % (t.dtype, tuple(t.shape)))

    # ------------------------------------------------------ coalescing

    def _start_coalescing(self, device):
        if self._coalescing is not None:
            raise Unsupported("_start_coalescing", "coalescing is already on")
        self._coalescing = []

    def _end_coalescing(self, device):
        works, self._coalescing = self._coalescing, None
        if works is None:
            raise Unsupported("_end_coalescing", "coalescing was not started")
        kind = "cuda" if self.communicator.run_kind == "real" else "host"
        results = [r for w in works for r in (w.result() or [])]
        return self.communicator.submit("coalesced", kind, lambda stream: None, results)

    # ------------------------------------------------------- lifecycle

    def shutdown(self):
        self._p2p.flush()
        self.communicator.destroy()

    def abort(self):
        self.communicator.abort()

    def _set_sequence_number_for_group(self):
        pass

    def __repr__(self):
        c = self.communicator
        return "ProcessGroupGpubridge(rank=%d, size=%d, islands=%s)" % (
            c.rank, c.size, c.topology["island_vendor"])


def _create(dist_options, pg_options):
    """torch's extended creator: the group's store, rank, size and timeout, and pg_options (gpubridge.Options)."""
    return ProcessGroupGpubridge(dist_options.store, dist_options.group_rank, dist_options.group_size,
                                 dist_options.timeout, pg_options)


def register():
    """Registers the backend with torch.distributed (idempotent)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu", "cuda"])
