"""Point-to-point calls issued one at a time, fused like a group.

torch.distributed's batch_isend_irecv (and isend/irecv) gives a process
group that is not a plain c10d ProcessGroup one send or receive at a time.
Issued at once, a ring of them would be a send on every rank with no
receive posted (under NCCL it hangs; gpubridge's call check refuses it).
So a send or receive is held back, and the ones held are issued as one
group (gbGroupStart .. gbGroupEnd) at the first of: a wait on (or a query
of) any of their Works, the next other call of the group (every launch
passes through Communicator.submit, which flushes first), or the group's
shutdown. A rank that posts isend and irecv and waits gets NCCL's grouped
semantics; the order of calls within the group is kept.
"""
import torch.distributed as dist


class P2pQueue:
    def __init__(self, communicator):
        self._comm = communicator
        self._held = []  # (is_send, tensor, peer, DeferredWork)
        communicator.before_submit = self.flush

    def add(self, is_send, tensor, peer):
        w = DeferredWork(self, tensor)
        self._held.append((is_send, tensor, peer, w))
        return w

    def flush(self):
        held, self._held = self._held, []
        if not held:
            return
        sends = [(t, p) for s, t, p, _ in held if s]
        recvs = [(t, p) for s, t, p, _ in held if not s]
        call = "send" if not recvs else "recv" if not sends else "send/recv"
        try:
            # Their Works are the caller's to wait for later, from any stream:
            # on the communicator's stream even when a synchronous call flushes them.
            with self._comm.on_current_stream(False):
                work = self._comm.send_recv(sends, recvs, call)
        except Exception as e:
            for _, _, _, w in held:
                w._failed = e
            raise
        for _, _, _, w in held:
            w._work = work


class DeferredWork(dist.Work):
    """The Work of a held send or receive: any use of it flushes the queue."""

    def __init__(self, queue, tensor):
        super().__init__()
        self._queue = queue
        self._tensor = tensor
        self._work = None
        self._failed = None

    def _issued(self):
        if self._work is None and self._failed is None:
            self._queue.flush()
        if self._failed is not None:
            raise self._failed
        return self._work

    def wait(self, timeout=None):
        return self._issued().wait(timeout)

    def is_completed(self):
        return self._issued().is_completed()

    def is_success(self):
        return self._issued().is_success()

    def exception(self):
        return self._failed if self._failed is not None else self._issued().exception()

    def result(self):
        return [self._tensor]

    def synchronize(self):
        self.wait()

    def block_current_stream(self):
        self.wait()

    def get_future(self):
        return self._issued().get_future()
