"""Waits that answer Ctrl-C.

Python runs a SIGINT's handler, which raises KeyboardInterrupt, on the main
thread between bytecodes: never while a ctypes call blocks, and a blocked
wait wakes for it only when the kernel hands the signal to the main thread
and not to one of the library's. So no wait of this package is one long
call; each is cut into slices of at most SLICE_S, between which the handler
runs:

- a communicator's init is non-blocking (gbConfig_t.blocking = 0) and polled
  with gbCommGetAsyncError (init_polled);
- other blocking C calls run on a helper thread that this one waits for in
  slices (call);
- waits on Python objects are sliced (wait_event, join, until);
- a GPU barrier's host wait polls its event (poll_quick).

The callers abort the communicator on KeyboardInterrupt (gbCommAbort: every
wait inside the library for it returns, and peers see its connections
close), then let the interrupt go on.
"""
import threading
import time

from . import _lib
from ._lib import Error

SLICE_S = 0.05


def _pause(i):
    """The i-th poll's sleep: 1 ms, doubling up to SLICE_S, so a quick wait stays quick."""
    time.sleep(min(SLICE_S, 0.001 * (1 << min(i, 6))))


def _left(end):
    return max(0.0, min(SLICE_S, end - time.monotonic()))


def until(ready, timeout):
    """Polls ready() until it is true or timeout seconds passed; returns its last value."""
    end = time.monotonic() + timeout
    i = 0
    while True:
        value = ready()
        if value or time.monotonic() >= end:
            return value
        _pause(i)
        i += 1


# poll_quick yields this long before it naps, and naps at most this long. A
# barrier's ranks arrive up to a few milliseconds apart, and each must leave
# within microseconds of the last arrival: the first collective after the
# barrier waits for the last rank to leave. With 1 ms naps (and 2 ms of
# yielding) a rank left up to a millisecond late, and a burst of ten 1 MiB
# all-reduces through the torch backend after a barrier ran at 0.68 and 0.64
# of the C API's speed; with these 0.91 and 0.92 (one H100, MPS, alternated;
# docs/PERFORMANCE.md). ProcessGroupNCCL's barrier spins on its stream too.
_SPIN_S = 0.05
_NAP_MAX_S = 0.0002
_STOP_EVERY_S = 0.001


def poll_quick(ready, stop):
    """Polls ready() until it is true (True), or stop() is (False), with no
    helper thread: yielding for _SPIN_S, then in naps from 20 us up to
    _NAP_MAX_S, so the caller returns within microseconds of ready turning
    true in a barrier's usual wait, and within a fraction of a millisecond
    after a long one (ranks leave a barrier together). stop() is asked
    about every millisecond."""
    now = time.monotonic()
    spin_end = now + _SPIN_S
    ask_at = now + _STOP_EVERY_S
    nap = 20e-6
    while not ready():
        now = time.monotonic()
        if now >= ask_at:
            if stop():
                return False
            ask_at = now + _STOP_EVERY_S
        if now < spin_end:
            time.sleep(0)
            continue
        time.sleep(nap)
        nap = min(2 * nap, _NAP_MAX_S)
    return True


def wait_event(event, timeout):
    """event.wait(timeout), in slices: True once the event is set."""
    end = time.monotonic() + timeout
    while not event.wait(_left(end)):
        if time.monotonic() >= end:
            return False
    return True


def join(thread, timeout):
    """thread.join(timeout), in slices: True once the thread has ended."""
    end = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < end:
        thread.join(_left(end))
    return not thread.is_alive()


def abort_quietly(handle):
    """gbCommAbort, for a path that is already failing: a handle no longer live is no news."""
    try:
        _lib.comm_abort(handle)
    except Error:
        pass


def init_polled(start):
    """A communicator's non-blocking init: start() returns the new handle while
    its init still runs; this polls it until done and returns it. Its error is
    raised with the failed communicator freed; on KeyboardInterrupt it is
    aborted first."""
    handle = start()
    try:
        i = 0
        while True:
            err = _lib.comm_get_async_error(handle)
            if err == _lib.SUCCESS:
                return handle
            if err != _lib.IN_PROGRESS:
                text = _lib.get_last_error(handle)
                try:
                    _lib.comm_destroy(handle)
                except Error:
                    pass  # a failed communicator's destroy may answer with its failure again: said once, below
                raise Error(err, text)
            _pause(i)
            i += 1
    except KeyboardInterrupt:
        abort_quietly(handle)
        raise


def call(fn, *args, abandoned=None):
    """fn(*args) on a helper thread, which this thread waits for in slices:
    its result, or its exception raised here. On KeyboardInterrupt the
    interrupt goes on at once and fn runs on; abandoned(result), when given,
    runs once fn has returned (result None if fn raised), on whichever thread
    sees both happen."""
    box = {}
    done = threading.Event()
    lock = threading.Lock()
    state = {"returned": False, "interrupted": False}

    def body():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # handed to the caller, or dropped after an interrupt
            box["error"] = e
        with lock:
            state["returned"] = True
            late = state["interrupted"]
        done.set()
        if late and abandoned is not None:
            abandoned(box.get("value"))

    threading.Thread(target=body, name="gpubridge-wait", daemon=True).start()
    try:
        while not done.wait(SLICE_S):
            pass
    except KeyboardInterrupt:
        with lock:
            state["interrupted"] = True
            returned = state["returned"]
        if returned and abandoned is not None:
            abandoned(box.get("value"))
        raise
    if "error" in box:
        raise box["error"]
    return box.get("value")
