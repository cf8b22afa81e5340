"""The flight recorder from Python: observers, what is in flight, counters,
dumps (include/gpubridge/gpubridge.h, "flight recorder").

    h = gpubridge.observe(group, fn)   # fn(record) once per finished collective
    gpubridge.in_flight()              # {Communicator: [record, ...]} of those inside a collective
    gpubridge.counters(group)          # collectives, bytes and busy time per host group
    gpubridge.dump_trace(group)        # the recorder as gpubridge-trace/1 JSON; returns the path
    h.remove()

group is a gpubridge process group, a Communicator, or None (the communicator
of gpubridge.init(), else the default process group).

The library calls its observer on one of its own threads (a stream's worker).
The C callback here only copies the record's bytes onto a queue; a dispatcher
thread per observe() turns them into dicts and calls fn, so user code never
runs on a gpubridge thread and cannot hold up a collective. One C observer
per communicator serves every observe() of it.
"""
import ctypes
import queue
import threading

from . import _interrupt, _lib
from ._lib import Error

_RECORD_BYTES = ctypes.sizeof(_lib.CollRecord)
_STOP = object()
# How long remove() waits for fn to finish the records queued before it.
_DRAIN_SECONDS = 30.0


def _name(table, index):
    return table[index] if 0 <= index < len(table) else None


def durations(t, flags, start=None):
    """Seconds spent in each phase of a done record, from its stamps t (ns, 0 = not seen).

    The spans follow each other, so they add up to done - start: check from
    the start to the check's end; island (the island step before staging, or
    the whole call for a rank without a host step) up to staged; wait_proxy
    from staged to the bridge's begin; bridge; after (copy-back and the
    island step after the bridge) up to done. start defaults to enqueued."""
    enq, _cb, ce, staged, bb, be, done = t
    out = dict.fromkeys(("check", "island_before", "wait_proxy", "bridge", "after", "total"), 0.0)
    if not done or not enq:
        return out
    at = enq if start is None else max(enq, start)

    def span(end):
        nonlocal at
        if not end:
            return 0.0
        d = max(0, end - at)
        at = max(at, end)
        return d * 1e-9

    begin = at
    if flags & _lib.RECORD_HAS_CHECK:
        out["check"] = span(ce)
    if flags & _lib.RECORD_HAS_HOST_STEP:
        out["island_before"] = span(staged)
        out["wait_proxy"] = span(bb)
        out["bridge"] = span(be)
    out["after" if flags & _lib.RECORD_HAS_HOST_STEP else "island_before"] = span(done)
    out["total"] = max(0, done - begin) * 1e-9
    return out


def record_dict(rec, phase=None):
    """A CollRecord as plain Python values."""
    t = list(rec.t)
    return {
        "seq": rec.seq, "p2p_seq": rec.p2p_seq, "coll": _name(_lib.COLL_NAMES, rec.coll) or str(rec.coll),
        "count": rec.count, "dtype": _name(_lib.DTYPE_NAMES, rec.dtype), "op": _name(_lib.OP_NAMES, rec.op),
        "root": rec.root if rec.root >= 0 else None, "peer": rec.peer if rec.peer >= 0 else None,
        "npeers": rec.npeers, "policy": _lib.POLICIES.get(rec.policy) if rec.policy >= 0 else None,
        "nchunks": rec.nchunks, "chunks_bridged": rec.chunks_bridged,
        "check": bool(rec.flags & _lib.RECORD_HAS_CHECK), "host_step": bool(rec.flags & _lib.RECORD_HAS_HOST_STEP),
        "device_done": bool(rec.flags & _lib.RECORD_DEVICE_DONE),
        "phase": phase if phase is not None else _lib.coll_record_phase(rec),
        "state": _lib.RECORD_STATES.get(rec.state, str(rec.state)), "result": rec.result,
        "t_ns": {k: (v or None) for k, v in zip(_lib.PHASE_NAMES, t)},
        "durations_s": durations(t, rec.flags),
        "bytes": dict(zip(_lib.HOST_GROUPS, rec.bytes)),
    }


def _communicator(group, call):
    from .api import _resolve
    c = _resolve(group, call)
    if c._destroyed:
        raise Error(_lib.INVALID_USAGE, "gpubridge.%s: the communicator was destroyed" % call)
    return c


class _Hub:
    """The one C observer of a communicator, fanning records out to every Observer of it."""

    def __init__(self, comm):
        self.comm = comm
        self.observers = ()  # replaced, never changed in place: the callback reads it without a lock
        self.lock = threading.Lock()
        self.callback = _lib.OBSERVER(self._on_record)  # kept alive while set

    def _on_record(self, _comm, record, _user):
        # On a gpubridge thread: copy and hand over, nothing else.
        raw = ctypes.string_at(record, _RECORD_BYTES)
        for o in self.observers:
            o.queue.put(raw)

    def add(self, o):
        with self.lock:
            if not self.observers:
                _lib.comm_set_observer(self.comm.handle, self.callback)
            self.observers = self.observers + (o,)

    def discard(self, o):
        with self.lock:
            if o not in self.observers:
                return
            rest = tuple(x for x in self.observers if x is not o)
            if not rest:
                # Returns once the C library runs no call of the callback.
                _lib.comm_set_observer(self.comm.handle, None)
            self.observers = rest


class Observer:
    """What observe() returns: remove() stops the calls."""

    def __init__(self, comm, fn):
        self.comm = comm
        self.fn = fn
        self.queue = queue.SimpleQueue()
        self.errors = 0
        self._removed = False
        self._thread = threading.Thread(target=self._dispatch, daemon=True,
                                        name="gpubridge-observe-%d" % comm.rank)
        self._thread.start()

    def _dispatch(self):
        while True:
            raw = self.queue.get()
            if raw is _STOP:
                return
            try:
                self.fn(record_dict(_lib.CollRecord.from_buffer_copy(raw)))
            except Exception:  # an observer's bug must not stop the others' records
                self.errors += 1
                import traceback
                traceback.print_exc()

    def remove(self):
        """Stops the calls: fn gets every record that finished before remove() and none after.
        Called from inside fn, it returns without waiting for the rest."""
        if self._removed:
            return
        self._removed = True
        hub = self.comm._observer_hub
        if hub is not None:
            hub.discard(self)
        self.queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            _interrupt.join(self._thread, _DRAIN_SECONDS)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def observe(group, fn):
    """Calls fn(record) once per collective or send/recv group of group that finished (done or failed),
    in the order they finished, on a thread of this module. record is a dict (record_dict)."""
    if not callable(fn):
        raise Error(_lib.INVALID_ARGUMENT, "gpubridge.observe: fn must be callable, got %r" % (fn,))
    c = _communicator(group, "observe")
    with c._lock:
        if c._observer_hub is None:
            c._observer_hub = _Hub(c)
        hub = c._observer_hub
    o = Observer(c, fn)
    try:
        hub.add(o)
    except Error:
        o.queue.put(_STOP)
        raise
    return o


def detach(comm):
    """Removes every observer of comm (before it is destroyed or aborted)."""
    hub = comm._observer_hub
    if hub is None:
        return
    for o in hub.observers:
        try:
            o.remove()
        except Error:
            pass


def _in_flight_of(c):
    out = []
    for k, rec in enumerate(_lib.comm_get_in_flight(c.handle, 256)):
        out.append(record_dict(rec, "queued" if k > 0 else None))
    return out


def in_flight(group=None):
    """With group: its records still in flight, oldest first (those behind the first are "queued").
    Without: {Communicator: records} for every live communicator of this process inside a collective."""
    if group is not None:
        return _in_flight_of(_communicator(group, "in_flight"))
    from ._comm import live_communicators
    out = {}
    for c in live_communicators():
        try:
            recs = _in_flight_of(c)
        except Error:
            continue  # destroyed meanwhile
        if recs:
            out[c] = recs
    return out


def counters(group=None):
    """What the communicator did since its init: collectives, bytes and busy time per host group."""
    k = _lib.comm_get_counters(_communicator(group, "counters").handle)
    return {
        "enqueued": k.enqueued, "completed": k.completed, "failed": k.failed, "unrecorded": k.unrecorded,
        "by_coll": dict(zip(_lib.COLL_NAMES, k.by_coll)),
        "bytes": dict(zip(_lib.HOST_GROUPS, k.bytes)),
        "busy_s": {g: ns * 1e-9 for g, ns in zip(_lib.HOST_GROUPS, k.busy_ns)},
        "latency_s": k.latency_ns * 1e-9,
    }


def memory(group=None):
    """The staging memory the communicator holds on this rank, in bytes: pinned host memory of its own, the
    shared segments it maps (one physical copy per host) and device memory."""
    m = _lib.comm_get_memory(_communicator(group, "memory").handle)
    return {"pinned": m.pinned_bytes, "segments": m.segment_bytes, "device": m.device_bytes}


def dump_trace(group=None, dir=None):
    """Writes the communicator's flight recorder (gpubridge-trace/1) into dir (None: GPUBRIDGE_TRACE_DIR);
    returns the file's path."""
    return _lib.comm_dump_trace(_communicator(group, "dump_trace").handle, dir)
