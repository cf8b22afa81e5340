"""A gpubridge communicator driven with torch tensors.

Each method checks its arguments (and refuses what gpubridge cannot do)
before anything is enqueued, enqueues the C call on the communicator's stream
and returns a Work. The communicator is used by one thread at a time, as the
C API requires: a lock serializes enqueues from several Python threads.

On a GPU an asynchronous call goes on the communicator's own stream, which
first waits for the caller's current stream, so that it overlaps the
caller's later work; a synchronous one (torch's async_op=False, inside
on_current_stream()) goes on the current stream itself, as ProcessGroupNCCL
does: nothing would overlap it, and the hop between streams costs time (with
two processes time-slicing one GPU, milliseconds a call).
"""
import datetime
import threading
import weakref

import torch

from . import _interrupt, _lib, _tensors as T
from ._lib import Error
from ._tensors import Unsupported
from ._work import Events, Watcher, Work, completed_work

_live = weakref.WeakSet()


def _init_config(timeout_s, compression=None):
    """Settings of a non-blocking init (polled, so that Ctrl-C is heard: _interrupt.py),
    with timeout_s, when given, as every wait's deadline, and compression, when
    given, as the bridge compression ("off", "bf16", "fp8")."""
    t = None if timeout_s is None else max(1, min(86400, int(round(timeout_s))))
    return _lib.make_config(blocking=0, timeout_seconds=t, bridge_compression=compression)


def _wait_key(store, key, rank, timeout_s):
    """store.wait([key]) in slices (store.check), within timeout_s or the store's own timeout."""
    limit = timeout_s or getattr(store, "timeout", None) or 300.0
    if isinstance(limit, datetime.timedelta):
        limit = limit.total_seconds()
    if not _interrupt.until(lambda: store.check([key]), limit):
        raise Error(_lib.TIMEOUT, "rank %d waited %.0f s for rank 0 to publish the communicator's unique id (store "
                    "key %s): check that rank 0 is running and makes the same process group, or raise the "
                    "process group's timeout" % (rank, limit, key))


def _cuda_device(*groups):
    """The device of the first CUDA tensor in the groups (None: the current device)."""
    for tensors in groups:
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.is_cuda:
                return t.device
    return None


def _flat(items):
    """The tensors in a Work's result (lists nest: gather's is [outputs])."""
    out = []
    for x in items:
        out.extend(_flat(x) if isinstance(x, (list, tuple)) else [x])
    return out


class _StreamChoice:
    """Communicator.on_current_stream's context (a class: it runs on every synchronous call)."""
    __slots__ = ("tls", "yes", "before")

    def __init__(self, tls, yes):
        self.tls = tls
        self.yes = yes

    def __enter__(self):
        self.before = getattr(self.tls, "current", False)
        self.tls.current = self.yes

    def __exit__(self, *exc):
        self.tls.current = self.before


class Communicator:
    """Owns one gbComm_t, its stream, and what sees its Works finish (_work.py)."""

    before_submit = None  # called before every launch (the backend's held send/recv, _p2p.py)
    _observer_hub = None  # observers of observe() (_observe.py)

    def __init__(self, handle, timeout_s=None):
        self.handle = handle
        self.rank = _lib.comm_user_rank(handle)
        self.size = _lib.comm_count(handle)
        self.topology = _lib.comm_get_topology(handle)
        self.run_kind = self.topology["run_kind"]
        self.timeout_s = float(timeout_s) if timeout_s else 300.0
        self._lock = threading.RLock()
        self._destroyed = False
        self._free_lock = threading.Lock()
        self._freed = False  # gbCommDestroy or gbCommAbort was called
        self._cuda_stream = None
        self._future_streams = {}  # device: the stream GPU Works' futures record on
        self.future_lock = threading.Lock()  # the making of GPU Works' futures (not the call lock)
        self._end_error = None  # after an abort: what every GPU Work reports
        self._tls = threading.local()  # .current: on_current_stream() is in force on this thread
        if self.run_kind == "real":
            self._stream = None
            self._watcher = Events()
        else:
            self._stream = _lib.stream_create()
            self._watcher = Watcher("gpubridge-watch-%d" % self.rank, self._sync_host)
        _live.add(self)

    def __repr__(self):
        t = self.topology
        return "<gpubridge.Communicator rank %d of %d, %d islands (%s), %s>" % (
            self.rank, self.size, t["nislands"], ",".join(t["island_vendor"]),
            "destroyed" if self._destroyed else "0x%x" % self.handle)

    # ------------------------------------------------------------ creation

    @classmethod
    def from_unique_id(cls, nranks, unique_id, rank, timeout_s=None, compression=None):
        cfg = _init_config(timeout_s, compression)
        h = _interrupt.init_polled(lambda: _lib.comm_init_rank_start(nranks, unique_id, rank, cfg))
        return cls(h, timeout_s)

    @classmethod
    def from_env(cls, timeout_s=None):
        # Under torchrun the launcher's store is read before init starts (a
        # wait of its own): on a helper thread, whose handle an interrupt aborts.
        cfg = _init_config(timeout_s)
        h = _interrupt.init_polled(lambda: _interrupt.call(_lib.comm_init_from_env_start, cfg,
                                                           abandoned=_abort_started))
        return cls(h, timeout_s)

    @classmethod
    def from_store(cls, store, rank, size, timeout_s=None, prefix="gpubridge", compression=None):
        """Rank 0 makes the unique id and publishes it in a torch.distributed store.

        A store may serve several communicators one after another (a group
        destroyed and made again): a join counter numbers them, so a rank never
        reads an older communicator's id. Every rank joins generation g before
        any rank can join g + 1, since init waits for all ranks."""
        generation = (store.add(prefix + "/joins", 1) - 1) // size
        key = "%s/unique_id/%d" % (prefix, generation)
        if rank == 0:
            uid = _lib.get_unique_id()
            store.set(key, uid)
        else:
            _wait_key(store, key, rank, timeout_s)
            uid = store.get(key)
        return cls.from_unique_id(size, bytes(uid), rank, timeout_s, compression)

    def split(self, color, key):
        """gbCommSplit: a new Communicator of the ranks with the same color, or None.

        Ctrl-C while the ranks agree on the split ends this communicator too:
        gbCommSplit cannot be stopped from another thread, so it goes on on
        its own thread, which aborts the new communicator and this one once it
        returns. Ctrl-C while the new communicator starts aborts that one."""
        with self._lock:
            self._check_live("split")
            try:
                h = _interrupt.call(_lib.comm_split_start, self.handle, color, key, abandoned=self._split_abandoned)
            except KeyboardInterrupt:
                self._destroyed = True  # no call may use it now; _split_abandoned frees it
                raise
        if not h:
            return None
        return Communicator(_interrupt.init_polled(lambda: h), self.timeout_s)

    def _split_abandoned(self, child):
        if child:
            _interrupt.abort_quietly(child)
        self._abort_now()

    # ------------------------------------------------------------ teardown

    def destroy(self):
        """Finishes pending work, then frees the communicator (collective in
        effect). Ctrl-C while it waits aborts the communicator instead."""
        with self._lock:
            if self._destroyed:
                return
            self._destroyed = True
        self._detach_observers()
        try:
            stopped = self._watcher.stop(self.timeout_s + 60)
            # gbCommFinalize, the wait for the host steps, may be aborted from
            # this thread while it runs on another; what is left of
            # gbCommDestroy then is quick.
            res = _interrupt.call(_finalize, self.handle) if stopped else None
        except KeyboardInterrupt:
            self.interrupted()
            raise
        with self._free_lock:
            self._freed = True
        # A stuck watcher, or a finalize that timed out on a live communicator
        # (gbCommDestroy would wait once more): abort instead.
        if res is None or (res == _lib.TIMEOUT and not self._failed()):
            self._end_error = Error(_lib.TIMEOUT, "the communicator (rank %d of %d) was aborted: its work did "
                                    "not finish at destroy" % (self.rank, self.size))
            _lib.comm_abort(self.handle)
        else:
            _lib.comm_destroy(self.handle)
        if self._stream is not None and stopped:
            _lib.stream_destroy(self._stream)

    def abort(self):
        """Stops the communicator at once; pending Works fail."""
        with self._lock:
            if self._destroyed:
                return
            self._destroyed = True
        self._detach_observers()
        self._abort_now()

    def interrupted(self):
        """Ctrl-C came in one of this communicator's waits: abort it (pending
        Works fail, peers see it go), whichever thread holds its lock; the
        caller lets the interrupt go on."""
        self._destroyed = True
        self._detach_observers()
        self._abort_now()

    def _abort_now(self):
        """gbCommAbort once, then the watcher's end (its waits return at once)."""
        self._destroyed = True
        with self._free_lock:
            if self._freed:
                return
            self._freed = True
            self._end_error = Error(_lib.INVALID_USAGE, "the communicator (rank %d of %d) was aborted"
                                    % (self.rank, self.size))
        _interrupt.abort_quietly(self.handle)
        self._watcher.stop(self.timeout_s + 60)

    def _failed(self):
        return _lib.comm_get_async_error(self.handle) != _lib.SUCCESS

    def _detach_observers(self):
        if self._observer_hub is not None:
            from ._observe import detach
            detach(self)

    def _check_live(self, call):
        if self._destroyed:
            raise Error(_lib.INVALID_USAGE, "%s: the communicator was destroyed" % call)

    # ------------------------------------------------------- device sync

    def _sync_host(self, batch):
        _lib.stream_synchronize(self._stream)

    def async_error(self):
        """The communicator's failure as an Error, None while it works (GPU
        Works report it); after an abort, the abort."""
        with self._free_lock:
            if self._freed:
                return self._end_error
            err = _lib.comm_get_async_error(self.handle)
            if err in (_lib.SUCCESS, _lib.IN_PROGRESS):
                return None
            return Error(err, _lib.get_last_error(self.handle))

    def future_stream(self, device):
        """The stream on device that GPU Works' futures record on (made once; under future_lock)."""
        if device not in self._future_streams:
            self._future_streams[device] = torch.cuda.Stream(device=device)
        return self._future_streams[device]

    # ------------------------------------------------------------ issuing

    def _kind(self, call, *tensors):
        kind = None
        for t in tensors:
            k = T.device_kind(call, t, self.run_kind)
            if kind is not None and k != kind:
                raise Unsupported(call, "tensors on different devices")
            kind = k
        return kind

    def submit(self, call, kind, launch, result, keep=(), post=None, scalars=(), blocking=False):
        """Runs launch(stream) under the lock and returns its Work.

        launch enqueues one or more C calls; post copies staged results back.
        On a GPU the calls go on the communicator's stream after the current
        stream's work, or on the current stream inside on_current_stream();
        on the host device on the communicator's stream."""
        post = list(post or ())
        if self.before_submit is not None:
            self.before_submit()  # held sends and receives go first (_p2p.py)
        with self._lock:
            self._check_live(call)
            if kind == "cuda":
                # The tensors' device's current stream: the calling thread's
                # current device may be another (a future's callback may
                # run on another thread).
                cur = torch.cuda.current_stream(_cuda_device(keep, result))
                on_cur = getattr(self._tls, "current", False)
                s = cur if on_cur else self._own_stream(cur)
                launch(s.cuda_stream)
                if post:
                    with torch.cuda.stream(s):
                        for fn in post:
                            fn()
                ev = torch.cuda.Event()
                ev.record(s)
                if not on_cur:  # the caching allocator keeps them until s is past this call
                    for t in list(keep) + list(scalars) + (_flat(result) if post else []):
                        if isinstance(t, torch.Tensor) and t.is_cuda:
                            t.record_stream(s)
                work = Work(self, call, result, list(keep) + list(scalars), (), ev, blocking, on_cur, s)
            else:
                launch(self._stream)
                work = Work(self, call, result, list(keep) + list(scalars), post)
            self._watcher.add(work)
        return work

    def _own_stream(self, cur):
        """The communicator's stream (on cur's device), made to wait for cur."""
        if self._cuda_stream is None:
            self._cuda_stream = torch.cuda.Stream(device=cur.device)
        self._cuda_stream.wait_stream(cur)
        return self._cuda_stream

    def on_current_stream(self, yes=True):
        """A context: calls this thread issues inside go on its current CUDA
        stream (yes) or on the communicator's own (not yes)."""
        return _StreamChoice(self._tls, yes)

    # Reductions: premul_sum makes a one-call op and frees it once enqueued
    # (NCCL semantics: an op may be destroyed as soon as the last call given it returned).
    def _with_op(self, call, name, factor, dtype_code, tensor_dtype, fn):
        if name != "premul_sum":
            fn(T.gb_op_code(name))
            return ()
        if isinstance(factor, torch.Tensor):
            scalar = factor.reshape(-1)[:1].to(tensor_dtype)
            residence = _lib.SCALAR_DEVICE
        else:
            scalar = torch.tensor([float(factor)], dtype=tensor_dtype)
            residence = _lib.SCALAR_HOST_IMMEDIATE
        op = _lib.red_op_create_pre_mul_sum(scalar.data_ptr(), dtype_code, residence, self.handle)
        try:
            fn(op)
        finally:
            _lib.red_op_destroy(op, self.handle)
        return (scalar,)

    # ------------------------------------------------------- collectives

    def all_reduce(self, tensor, op="sum", call="all_reduce"):
        name, factor = T.op_name(op)
        kind = self._kind(call, tensor)
        post = []
        buf = T.contiguous_out(tensor, post)
        view, dt, name = T.reduce_view(call, buf, name)
        n = view.numel()
        if n == 0:
            return completed_work(self, call, [tensor])
        scal = []

        def launch(stream):
            scal.extend(self._with_op(call, name, factor, dt, view.dtype, lambda o: _lib.all_reduce(
                view.data_ptr(), view.data_ptr(), n, dt, o, self.handle, stream)))
        return self.submit(call, kind, launch, [tensor], keep=(view,), post=post, scalars=scal)

    def reduce(self, tensor, root, op="sum", call="reduce"):
        name, factor = T.op_name(op)
        kind = self._kind(call, tensor)
        self._check_root(call, root)
        post = []
        buf = T.contiguous_out(tensor, post) if self.rank == root else T.contiguous_in(tensor)
        view, dt, name = T.reduce_view(call, buf, name)
        n = view.numel()
        if n == 0:
            return completed_work(self, call, [tensor])
        scal = []

        def launch(stream):
            scal.extend(self._with_op(call, name, factor, dt, view.dtype, lambda o: _lib.reduce(
                view.data_ptr(), view.data_ptr(), n, dt, o, root, self.handle, stream)))
        return self.submit(call, kind, launch, [tensor], keep=(view,), post=post, scalars=scal)

    def broadcast(self, tensor, root, call="broadcast"):
        kind = self._kind(call, tensor)
        self._check_root(call, root)
        post = []
        buf = T.contiguous_out(tensor, post)
        view, dt = T.move_view(buf)
        n = view.numel()
        if n == 0:
            return completed_work(self, call, [tensor])

        def launch(stream):
            _lib.broadcast(view.data_ptr(), view.data_ptr(), n, dt, root, self.handle, stream)
        return self.submit(call, kind, launch, [tensor], keep=(view,), post=post)

    def all_gather_into_tensor(self, output, input, call="all_gather_into_tensor", then=(), result=None):
        """then: copies that run once the gathered data is there (list outputs)."""
        kind = self._kind(call, output, input)
        T.same_shape(call, output, input, "output and input")
        if output.numel() != input.numel() * self.size:
            raise Unsupported(call, "output has %d elements; it needs world size (%d) x input (%d)"
                              % (output.numel(), self.size, input.numel()))
        post = []
        out = T.contiguous_out(output, post)
        inp = T.contiguous_in(input)
        ov, dt = T.move_view(out)
        iv, _ = T.move_view(inp)
        n = iv.numel()
        result = [output] if result is None else result
        if n == 0:
            return completed_work(self, call, result)

        def launch(stream):
            _lib.all_gather(iv.data_ptr(), ov.data_ptr(), n, dt, self.handle, stream)
        return self.submit(call, kind, launch, result, keep=(ov, iv), post=post + list(then))

    def reduce_scatter_tensor(self, output, input, op="sum", call="reduce_scatter_tensor"):
        name, factor = T.op_name(op)
        kind = self._kind(call, output, input)
        T.same_shape(call, output, input, "output and input")
        if input.numel() != output.numel() * self.size:
            raise Unsupported(call, "input has %d elements; it needs world size (%d) x output (%d)"
                              % (input.numel(), self.size, output.numel()))
        post = []
        out = T.contiguous_out(output, post)
        inp = T.contiguous_in(input)
        ov, dt, oname = T.reduce_view(call, out, name)
        iv, _, _ = T.reduce_view(call, inp, name)
        n = ov.numel()
        if n == 0:
            return completed_work(self, call, [output])
        scal = []

        def launch(stream):
            scal.extend(self._with_op(call, oname, factor, dt, ov.dtype, lambda o: _lib.reduce_scatter(
                iv.data_ptr(), ov.data_ptr(), n, dt, o, self.handle, stream)))
        return self.submit(call, kind, launch, [output], keep=(ov, iv), post=post, scalars=scal)

    def all_to_all_single(self, output, input, call="all_to_all_single"):
        kind = self._kind(call, output, input)
        T.same_shape(call, output, input, "output and input")
        if input.numel() != output.numel() or input.numel() % self.size:
            raise Unsupported(call, "equal splits need input and output of the same size, divisible by the "
                              "world size (%d); got %d and %d" % (self.size, input.numel(), output.numel()))
        post = []
        out = T.contiguous_out(output, post)
        inp = T.contiguous_in(input)
        ov, dt = T.move_view(out)
        iv, _ = T.move_view(inp)
        n = iv.numel() // self.size
        if n == 0:
            return completed_work(self, call, [output])
        if iv.data_ptr() == ov.data_ptr():
            iv = iv.clone()  # gbAllToAll buffers must not overlap

        def launch(stream):
            _lib.all_to_all(iv.data_ptr(), ov.data_ptr(), n, dt, self.handle, stream)
        return self.submit(call, kind, launch, [output], keep=(ov, iv), post=post)

    def check_p2p(self, call, tensor, peer):
        """What send_recv would refuse, refused when the call is made (it may be held)."""
        self._kind(call, tensor)
        self._check_root(call, peer, "peer")

    def send_recv(self, sends, recvs, call):
        """One group of point-to-point calls: sends [(tensor, peer)], recvs [(tensor, peer)].
        Tensors move as their own type, else as bytes."""
        tensors = [t for t, _ in sends] + [t for t, _ in recvs]
        kind = self._kind(call, *tensors)
        for _, peer in sends + recvs:
            self._check_root(call, peer, "peer")
        post = []
        sv = [(T.move_view(T.contiguous_in(t)), p) for t, p in sends]
        rv = [(T.move_view(T.contiguous_out(t, post)), p) for t, p in recvs]

        def launch(stream):
            _lib.group_start()
            try:
                for (v, dt), p in sv:
                    if v.numel():
                        _lib.send(v.data_ptr(), v.numel(), dt, p, self.handle, stream)
                for (v, dt), p in rv:
                    if v.numel():
                        _lib.recv(v.data_ptr(), v.numel(), dt, p, self.handle, stream)
            finally:
                _lib.group_end()
        keep = [v for (v, _), _ in sv + rv]
        return self.submit(call, kind, launch, [t for t, _ in recvs] or [t for t, _ in sends],
                           keep=keep, post=post)

    def barrier(self, call="barrier"):
        if self.run_kind == "real":
            kind = "cuda"
        else:
            kind = "host"

        def launch(stream):
            _lib.barrier(self.handle, stream)
        return self.submit(call, kind, launch, [], blocking=True)

    def _check_root(self, call, root, what="root"):
        if not isinstance(root, int) or root < 0 or root >= self.size:
            raise Unsupported(call, "%s %r is not a rank of this group [0, %d)" % (what, root, self.size))


def _finalize(handle):
    """gbCommFinalize's result (not raised: destroy decides)."""
    try:
        _lib.comm_finalize(handle)
        return _lib.SUCCESS
    except Error as e:
        return e.code


def _abort_started(handle):
    """An init started after Ctrl-C came: stopped once it has a handle."""
    if handle:
        _interrupt.abort_quietly(handle)


def live_communicators():
    """The communicators of this process not yet destroyed."""
    return [c for c in list(_live) if not c._destroyed]


def destroy_all():
    """Frees every live communicator of this process (at exit); destroy and abort remove its observers first."""
    for c in list(_live):
        try:
            # A host Work not yet picked up by the watcher is stuck; a GPU call
            # still running is only not done yet: destroy waits for it (bounded).
            if c.run_kind != "real" and c._watcher.pending():
                c.abort()
            else:
                c.destroy()
        except Exception:  # at exit: the next communicator still goes
            pass
