"""Work objects, and what sees them finish.

A collective is enqueued on a stream and returns at once (NCCL semantics).
Its Work turns complete only when the device work is done:

- host device (simulated and CPU ranks): the library offers no per-call
  event, so one watcher thread per communicator calls gbStreamSynchronize on
  the communicator's stream (outside the GIL) and marks every Work enqueued
  before that call complete, with the stream's error if it had one. Staged
  results (non-contiguous outputs, list outputs) are copied back there, before
  the Work reads as complete. is_completed() only reads a flag.
- real GPUs: a CUDA event recorded after the call on the stream it went on;
  is_completed() queries it, wait() makes the current stream wait for it (no
  host block; nothing to do for a synchronous call, which ran on the stream
  that waits for it at once) and raises the communicator's error if it
  failed. No thread wakes per call: get_future() returns a CUDA future that
  is complete at once and orders its consumers' streams after the event
  (ProcessGroupNCCL's), and the communicator keeps only the events of calls
  not yet seen done (Events), for destroy to wait for.

Every wait here is cut into slices so that Ctrl-C is heard (_interrupt.py);
a KeyboardInterrupt in wait() aborts the communicator before it goes on.
"""
import collections
import datetime
import threading

import torch
import torch.distributed as dist

from . import _interrupt, _lib
from ._lib import Error

# The watcher wakes this often when idle, to notice a stop request promptly
# even if a notify was missed.
_IDLE_POLL_S = 1.0


def _seconds(timeout, default):
    if timeout is None:
        return default
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout)
    return default if s <= 0 else s


class Work(dist.Work):
    """One enqueued call (or several, coalesced). result() is its output tensors."""

    def __init__(self, comm, call, result, keep, post, event=None, blocking=False, on_caller_stream=False,
                 stream=None):
        super().__init__()
        self._comm = comm
        self._call = call
        self._result = result
        self._keep = keep        # tensors the device may still read or write
        self._post = post        # host device: run after the device work, before completion
        self._event = event      # real GPUs: recorded after the call on stream
        self._stream = stream
        self._blocking = blocking  # GPU barrier: wait() blocks the host as well
        # A synchronous call on the caller's current stream, which torch (or
        # gpubridge's API) waits for at once, on that stream: wait() has no
        # stream to order.
        self._on_caller_stream = on_caller_stream
        self._done = threading.Event() if event is None else None  # GPUs: the event tells
        self._error = None
        self._done_seen = False  # GPUs: the event was seen done with the communicator well
        self._future = torch.futures.Future() if event is None else None  # GPUs: made when asked for

    # Called by the watcher thread.
    def _complete(self, error):
        if error is None:
            try:
                for fn in self._post:
                    fn()
            except Exception as e:  # a failed copy-back fails the Work, not the watcher
                error = e
        self._error = error
        self._keep = None
        self._post = ()
        if self._done is not None:
            self._done.set()
        if error is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(error)

    def is_completed(self):
        if self._event is not None:
            return self.exception() is not None or self._event.query()
        return self._done.is_set()

    def is_success(self):
        return self.is_completed() and self.exception() is None

    def exception(self):
        """GPUs: the communicator's failure, unless this call was seen done before it."""
        if self._event is not None and self._error is None and not self._done_seen:
            self._error = self._comm.async_error()
            self._done_seen = self._error is None and self._event.query()
        return self._error

    def result(self):
        return self._result

    def wait(self, timeout=None):
        """Host device: blocks until the call finished (up to the timeout, the
        process group's by default). GPU: the current stream waits for the
        call; the host does not block (but for a barrier). Ctrl-C while it
        blocks aborts the communicator (pending Works fail) and goes on."""
        if self._event is not None:
            if self.exception() is not None:
                raise self._error
            if self._blocking:
                self._interruptible(self._host_wait)
                if self.exception() is not None:
                    raise self._error
            elif not self._on_caller_stream:
                torch.cuda.current_stream().wait_event(self._event)
            return True
        limit = _seconds(timeout, self._comm.timeout_s + _MARGIN_S)
        if not self._interruptible(_interrupt.wait_event, self._done, limit):
            raise Error(_lib.TIMEOUT, "%s did not finish within %.0f s (rank %d of %d); a peer may have "
                        "stopped or called a different collective. Raise the process group's timeout "
                        "or GPUBRIDGE_TIMEOUT if the work is only slow" %
                        (self._call, limit, self._comm.rank, self._comm.size))
        if self._error is not None:
            raise self._error
        return True

    def _interruptible(self, wait, *args):
        try:
            return wait(*args)
        except KeyboardInterrupt:
            self._comm.interrupted()
            raise

    def synchronize(self):
        self.wait()

    def _host_wait(self):
        """A barrier's host wait: polls its event (no helper thread per
        wait), ending early on the communicator's error."""
        _interrupt.poll_quick(self._event.query, lambda: self._comm.async_error() is not None)

    def block_current_stream(self):
        self.wait()

    def get_future(self):
        if self._future is None:
            with self._comm.future_lock:
                if self._future is None:
                    self._future = self._cuda_future()
        return self._future

    def _cuda_future(self):
        """A future complete at once whose consumers' streams wait for the
        call's event: it records on a stream of the communicator's that
        waited for the event, not on the call's stream (later calls there).
        A barrier's result holds no tensor to carry that order, so its
        future is completed once the event is done (the host waits, as in
        its wait())."""
        device = self._stream.device
        future = torch.futures.Future(devices=[device])
        if self._blocking and self.exception() is None:
            self._interruptible(self._host_wait)
        if self.exception() is not None:
            future.set_exception(self._error)
            return future
        side = self._comm.future_stream(device)
        side.wait_event(self._event)
        with torch.cuda.stream(side):
            future.set_result(self._result)
        return future


# Work.wait waits this much past the communicator's timeout: the library's own
# deadline fails the call first, with a better message.
_MARGIN_S = 30.0


def completed_work(comm, call, result):
    """A Work with nothing to wait for (a call with no data, or a one-rank group)."""
    w = Work(comm, call, result, None, ())
    w._complete(None)
    return w


class Events:
    """Real GPUs: the events of the calls not yet seen done, oldest first
    (pruned as calls are added), for destroy to wait for; no thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._events = collections.deque()
        self._broken = None  # a CUDA error a query raised: destroy aborts instead of waiting

    def add(self, work):
        with self._lock:
            self._prune()
            self._events.append(work._event)

    def _prune(self):
        try:
            while self._events and self._events[0].query():
                self._events.popleft()
        except RuntimeError as e:  # a sticky CUDA error: nothing more will finish
            self._broken = e
            self._events.clear()

    def pending(self):
        with self._lock:
            self._prune()
            return len(self._events)

    def stop(self, timeout_s):
        """Waits (in slices) until every call is done; False if some is not
        within timeout_s, or the device failed."""
        return _interrupt.until(lambda: self.pending() == 0, timeout_s) and self._broken is None


class Watcher:
    """Completes a communicator's Works in order. sync(batch) blocks until the
    device finished every call of batch and raises the first error."""

    def __init__(self, name, sync):
        self._sync = sync
        self._cond = threading.Condition()
        self._pending = []
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, work):
        with self._cond:
            if self._stopping:
                raise Error(_lib.INVALID_USAGE, "%s after the communicator was destroyed" % work._call)
            self._pending.append(work)
            self._cond.notify()

    def pending(self):
        with self._cond:
            return len(self._pending)

    def _run(self):
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait(_IDLE_POLL_S)
                if not self._pending:
                    return
                batch = self._pending
                self._pending = []
            try:
                self._sync(batch)
                err = None
            except Exception as e:
                err = e
            for w in batch:
                w._complete(err)

    def stop(self, timeout_s):
        """Finishes pending Works (each bounded by the library's deadline), then
        ends the thread; False if it is still running after timeout_s."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            _interrupt.join(self._thread, timeout_s)
        return not self._thread.is_alive()
