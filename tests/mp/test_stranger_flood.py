"""A flood of strangers must not keep a job from starting or running.

1. While the job starts, 1100 idle connections (more than the 1024 a
   listener keeps waiting) are opened to MASTER_PORT, where rank 0 hosts the
   rendezvous root; rank 3 waits for a file, so the root is still gathering.
   The root must stay bound to 127.0.0.1 (MASTER_ADDR), not 0.0.0.0.
2. After init, 1100 more go to rank 1's peer listener; then the ranks run
   validated collectives, and a stranger connecting meanwhile must be closed
   within 2 s (measured).
3. The same flood with every rank limited to 96 descriptors (prlimit), so
   accept() runs out of descriptors: the job must still finish.
Checks: job exit 0 with correct results, 'refused a connection' logged by the
root and by rank 1's listener, and the log stays short (a summary per second).
"""
import os
import re
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
FLOOD = 1100


class Flood(threading.Thread):
    """Keeps opening idle connections to port until `count` were accepted by
    the kernel or the deadline; holds them until stop()."""

    def __init__(self, port, count, deadline_s):
        super().__init__(daemon=True)
        self.port, self.count, self.end = port, count, time.monotonic() + deadline_s
        self.socks, self.done = [], threading.Event()

    def run(self):
        while len(self.socks) < self.count and time.monotonic() < self.end and not self.done.is_set():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(1.0)
            try:
                s.connect(("127.0.0.1", self.port))
                self.socks.append(s)
            except OSError:
                s.close()
                time.sleep(0.01)  # retry interval of a deadline-bounded loop: the listener is not up yet

    def stop(self):
        self.done.set()
        if self.ident is not None:
            self.join(10)
        for s in self.socks:
            s.close()


def listening_on(port):
    """Local addresses of LISTEN sockets on port, from /proc/net/tcp{,6}."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    addr, p = local.split(":")
                    if state == "0A" and int(p, 16) == port:
                        out.append(addr)
        except OSError:
            pass
    return out


def read_logs(d):
    logs = {}
    for name in os.listdir(d):
        if "log." in name:
            with open(os.path.join(d, name), errors="replace") as f:
                logs[name] = f.read()
    return logs


def stranger_closed_within(port, limit_s):
    """Connects one stranger that sends garbage (not the hello magic); seconds
    until the listener closes it. (A silent one is given 10 s for its hello.)"""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.monotonic()
    s.sendall(b"\xff" * 64)
    s.settimeout(limit_s + 15)
    try:
        s.recv(1)
    except OSError:
        pass
    took = time.monotonic() - t0
    s.close()
    return took


def run_case(suite, tmp, name, nofile):
    port = harness.free_port()
    go_init, go_run = os.path.join(tmp, name + "-init"), os.path.join(tmp, name + "-run")
    env = harness.clean_env(GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_SUBSYS="INIT,NET,BOOT",
                            GPUBRIDGE_DEBUG_FILE=os.path.join(tmp, name + "-log.%p"), GPUBRIDGE_TIMEOUT=60,
                            GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES="4K")
    layout = ",".join(harness.vendor_list(VENDORS))
    prog = [harness.program("rank_collectives"), "--layout", layout, "--wait-file", "3:" + go_init,
            "--wait-file-after-init", go_run, "--reps", "1500", "--allreduce", "1,7,33000:float32:sum:oi"]
    cmd = harness.launch_cmd(N, prog, VENDORS, timeout=150, port=port)
    if nofile:
        cmd = ["prlimit", "--nofile=%d:%d" % (nofile, nofile), "--"] + cmd
    root_flood = Flood(port, FLOOD, 60)
    root_flood.start()
    job = harness.LiveJob(cmd, env)
    root_flood.join(70)
    suite.check(len(root_flood.socks) >= (FLOOD if not nofile else 200),
                "%s: %d idle strangers connected to the root's port" % (name, len(root_flood.socks)))
    if not nofile:
        addrs = listening_on(port)
        suite.check(addrs and all(a == "0100007F" for a in addrs),
                    "%s: the root listens on 127.0.0.1 only (MASTER_ADDR)" % name, "LISTEN on %d: %s" % (port, addrs))
    open(go_init, "w").close()

    def rank1_port():
        for text in read_logs_named(tmp, name).values():
            m = re.search(r"listening for peers on 127\.0\.0\.1:(\d+)", text)
            r = re.search(r"rank (\d+) of 4 ready", text)
            if m and r and r.group(1) == "1":
                return int(m.group(1))
        return None

    p1 = harness.wait_until(rank1_port, harness.scaled(60))
    suite.check(p1 is not None, "%s: rank 1 logs its peer listener and is ready" % name, job.text()[0][-2000:])
    peer_flood = None
    if p1:
        peer_flood = Flood(p1, FLOOD if not nofile else 300, 30)
        peer_flood.run()
    open(go_run, "w").close()
    if p1:
        # While the collectives run: one more stranger, refused within 2 s.
        took = stranger_closed_within(p1, 2.0)
        suite.check(took <= 2.0, "%s: a stranger connecting while collectives run is closed within 2 s" % name,
                    "closed after %.2f s" % took)
        print("%s: stranger closed after %.2f s while collectives ran" % (name, took), flush=True)
    res = job.finish(150)
    root_flood.stop()
    if peer_flood:
        peer_flood.stop()
    lines = res.lines()
    oks = [r for r in range(N) if any(l.startswith("ok:") for l in lines.get(r, []))]
    print("%s: rc %s, %.1f s, ranks ok %s" % (name, res.rc, res.elapsed, oks), flush=True)
    suite.check(res.rc == 0 and oks == list(range(N)) and not res.timed_out,
                "%s: the job completes with correct results" % name, "rc %s\n%s" % (res.rc, res.tail()))
    logs = read_logs_named(tmp, name)
    on_root = re.compile(r"rendezvous root: refused a connection from 127\.0\.0\.1:\d+ on [0-9.]+:%d\b" % port)
    suite.check(any(on_root.search(t) for t in logs.values()), "%s: the root logs refused strangers" % name)
    if p1:
        on_p1 = re.compile(r"refused a connection from 127\.0\.0\.1:\d+ on 127\.0\.0\.1:%d\b" % p1)
        suite.check(any(on_p1.search(t) for t in logs.values()), "%s: rank 1's listener logs refused strangers" % name)
    biggest = max((t.count("\n") for t in logs.values()), default=0)
    suite.check(biggest < 1500, "%s: the log stays bounded under the flood (%d lines at most)" % (name, biggest))


def read_logs_named(tmp, name):
    """{file: text} of this case's rank logs."""
    return {n: t for n, t in read_logs(tmp).items() if n.startswith(name + "-log.")}


def main():
    harness.require_built("rank_collectives")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * FLOOD + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    suite = harness.Suite("stranger_flood")
    tmp = tempfile.mkdtemp(prefix="gb-flood-")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    try:
        if not only or only in "flood":
            run_case(suite, tmp, "flood", None)
        if (not only or only in "emfile") and shutil.which("prlimit"):
            run_case(suite, tmp, "emfile", 96)
        elif not shutil.which("prlimit"):
            print("SKIP emfile: prlimit is missing")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    suite.done()


if __name__ == "__main__":
    main()
