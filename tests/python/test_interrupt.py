"""Ctrl-C is heard in the package's waits, long before GPUBRIDGE_TIMEOUT (60 s
here): a process whose gpubridge.init() waits for a second rank that never
comes, and one whose Work.wait() waits for a barrier its peer never enters,
each get SIGINT once their wait is under way (seen in their output: the
rendezvous root's INFO line that rank 0 joined; the barrier in flight) and
must end within a few seconds with KeyboardInterrupt, leaving no process of
their session and no /dev/shm entry of theirs behind. So must the poll of a
GPU barrier's host wait (_interrupt.poll_quick), which also returns once
ready() turns true on another thread, and False once stop() is true."""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

INTERRUPT_S = 5.0   # SIGINT to exit
START_S = 60.0      # start to the marker (torch's import, on a loaded machine)
JOINED = "rendezvous root: rank 0 of 2 joined"
IN_FLIGHT = "barrier in flight"
POLLING = "polling"


def child(mode):
    gbtest.setup_path()
    import gpubridge
    if mode == "poll":
        from gpubridge import _interrupt
        print(POLLING, flush=True)
        _interrupt.poll_quick(lambda: False, lambda: False)  # never ready
    elif mode == "init":
        gpubridge.init()  # rank 1 never comes
    elif mode == "peer":
        gpubridge.init()
        print("peer ready", flush=True)
        sys.stdin.read()  # stays in the job, without entering the barrier, until its stdin closes
    else:
        gpubridge.init()
        work = gpubridge.barrier(async_op=True)
        while not gpubridge.in_flight():  # the barrier's record, in flight: rank 1 never enters it
            time.sleep(0.01)
        print(IN_FLIGHT, flush=True)
        work.wait()
    print("returned: the interrupt was not heard", flush=True)


class Proc:
    """A child of this suite in a session of its own, its output collected."""

    def __init__(self, mode, rank, port, extra=None):
        env = gbtest.worker_env(rank, 2, "nvidia", port, extra)
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", mode], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace", start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def text(self):
        return "".join(self.lines)

    def wait_for(self, marker, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.p.poll() is None:
            if marker in self.text():
                return True
            time.sleep(0.01)  # polling the output, within the deadline
        return marker in self.text()

    def end(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait(30)
        self.reader.join(10)


def session_members(sid):
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.getsid(int(pid)) == sid:
                    out.append(int(pid))
            except OSError:
                pass
    return out


def shm_of(pid):
    try:
        return sorted(n for n in os.listdir("/dev/shm") if "-%d-" % pid in n or n.endswith("-%d" % pid))
    except FileNotFoundError:
        return []


def interrupt(proc, marker, what, problems):
    """SIGINT once marker is in proc's output; then the checks."""
    if not proc.wait_for(marker, START_S):
        proc.end(1)
        problems.append("%s: %r did not appear within %.0f s (exit %s):\n%s"
                        % (what, marker, START_S, proc.p.returncode, proc.text()[-3000:]))
        return
    pid = proc.p.pid
    t0 = time.monotonic()
    proc.p.send_signal(signal.SIGINT)
    proc.end(INTERRUPT_S)
    took = time.monotonic() - t0
    out = proc.text()
    tail = out.strip().splitlines()[-1] if out.strip() else ""
    if proc.p.returncode != -signal.SIGINT or tail != "KeyboardInterrupt" or took > INTERRUPT_S:
        problems.append("%s: after SIGINT exit %s in %.1f s, last line %r (want KeyboardInterrupt within %.0f s):\n%s"
                        % (what, proc.p.returncode, took, tail, INTERRUPT_S, out[-3000:]))
    else:
        print("ok: %s: KeyboardInterrupt %.2f s after SIGINT" % (what, took), flush=True)
    left = session_members(pid)
    if left:
        problems.append("%s: processes of its session still run: %s" % (what, left))
    if shm_of(pid):
        problems.append("%s: /dev/shm entries left behind: %s" % (what, shm_of(pid)))


def main():
    gbtest.require_torch()
    gbtest.require_library("gbCommGetAsyncError")
    problems = []
    # gpubridge.init() of rank 0 of 2, rank 1 never started.
    info = {"GPUBRIDGE_DEBUG": "INFO", "GPUBRIDGE_DEBUG_SUBSYS": "BOOT"}
    proc = Proc("init", 0, gbtest.free_port(), info)
    interrupt(proc, JOINED, "init waiting for rank 1", problems)

    # Work.wait() of a barrier rank 1 never enters.
    port = gbtest.free_port()
    peer = Proc("peer", 1, port)
    proc = Proc("wait", 0, port)
    interrupt(proc, IN_FLIGHT, "barrier's Work.wait()", problems)
    peer.p.stdin.close()
    peer.end(30)
    if peer.p.poll() is None:
        problems.append("the barrier's peer did not end")

    # A GPU barrier's host wait: interrupted, ready from another thread, stopped.
    interrupt(Proc("poll", 0, gbtest.free_port()), POLLING, "poll_quick", problems)
    gbtest.setup_path()
    from gpubridge import _interrupt
    flag = threading.Event()
    threading.Timer(0.05, flag.set).start()
    deadline = time.monotonic() + 30
    if not _interrupt.poll_quick(flag.is_set, lambda: time.monotonic() > deadline):
        problems.append("poll_quick: did not see ready() turn true within 30 s")
    if _interrupt.poll_quick(lambda: False, lambda: True):
        problems.append("poll_quick: returned True though ready() never was and stop() was")

    for p in problems:
        print("FAIL: " + p)
    if problems:
        sys.exit(1)
    print("5 passed, 0 failed")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
