"""Strangers: connections without the job secret must be refused, logged and
closed, and must not disturb the job.

1. Before the job starts, stranger threads connect (retrying until accepted)
   to MASTER_PORT, where rank 0 will host the rendezvous root, and send (a)
   200 random bytes, (b) a well-formed hello with a wrong secret; each waits
   for the root to close its socket. Rank 3 waits for a file before init, so
   the root is still gathering ranks; the driver creates it once every
   stranger was closed.
2. After init the ranks log "listening for peers on 127.0.0.1:PORT" and wait
   for a second file; the driver sends the same strangers to every such
   port, waits for each to be closed, creates the file, and the ranks run
   validated all-reduces.
Checks: job exit 0, correct results, "refused a connection" in the logs for
each stranger.
"""
import os
import re
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
HELLO_MAGIC = 0x67627269646765  # "gbridge", the first field of every hello
ROOT_TAG = -1


def garbage():
    b = bytearray(os.urandom(200))
    if struct.unpack_from("<Q", b)[0] == HELLO_MAGIC:
        b[0] ^= 0xFF
    return bytes(b)


def wrong_secret_hello(tag):
    """magic, secret[32], commHash, srcRank, tag, sockIndex, nsocks: as a rank's
    hello, with a secret no job holds."""
    return struct.pack("<Q32sQiiii", HELLO_MAGIC, os.urandom(32), 0x1234567890ABCDEF, 1, tag, 0, 1)


class Stranger(threading.Thread):
    """Connects to port (retrying until accepted), sends payload, waits for
    the other side to close. outcome: 'closed' or why not."""

    def __init__(self, port, payload, deadline_s):
        super().__init__(daemon=True)
        self.port, self.payload, self.deadline_s = port, payload, deadline_s
        self.outcome = "not started"

    def run(self):
        end = time.monotonic() + self.deadline_s
        while True:
            left = end - time.monotonic()
            if left <= 0:
                self.outcome = "never accepted"
                return
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(min(left, 2.0))
            try:
                s.connect(("127.0.0.1", self.port))
                if s.getsockname() == s.getpeername():  # a TCP self-connect, not the root
                    raise ConnectionRefusedError
                break
            except OSError:
                s.close()
                time.sleep(0.02)  # retry interval of a deadline-bounded wait
        try:
            s.sendall(self.payload)
        except OSError:
            pass  # the peer may close as soon as it has seen enough
        try:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    self.outcome = "still open at the deadline"
                    return
                s.settimeout(left)
                if not s.recv(4096):
                    self.outcome = "closed"
                    return
        except (ConnectionResetError, BrokenPipeError):
            self.outcome = "closed"
        except socket.timeout:
            self.outcome = "still open at the deadline"
        finally:
            s.close()


def listener_pattern(port):
    """Matches a refusal on this listening port ('... on 127.0.0.1:PORT: ...'),
    not a log prefix whose process id happens to equal the port."""
    return re.compile(r" on [^ ]+:%d\b" % port)


def strangers_to(port, tag, deadline_s):
    ts = [Stranger(port, garbage(), deadline_s), Stranger(port, wrong_secret_hello(tag), deadline_s)]
    for t in ts:
        t.start()
    return ts


_LISTEN = re.compile(r"listening for peers on 127\.0\.0\.1:(\d+)")


def read_logs(d):
    logs = {}
    for name in os.listdir(d):
        if name.startswith("log."):
            with open(os.path.join(d, name), errors="replace") as f:
                logs[name] = f.read()
    return logs


def main():
    harness.require_built("rank_collectives")
    suite = harness.Suite("strangers")
    tmp = tempfile.mkdtemp(prefix="gb-strangers-")
    try:
        run_test(suite, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    suite.done()


def run_test(suite, tmp):
    port = harness.free_port()
    before_init, after_init = os.path.join(tmp, "go-init"), os.path.join(tmp, "go-run")
    env = harness.clean_env(GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_FILE=os.path.join(tmp, "log.%p"),
                            GPUBRIDGE_TIMEOUT=30, GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES="4K")
    root_strangers = strangers_to(port, ROOT_TAG, 30)
    layout = ",".join(harness.vendor_list(VENDORS))
    cmd = harness.launch_cmd(N, [harness.program("rank_collectives"), "--layout", layout,
                                 "--wait-file", "3:" + before_init, "--wait-file-after-init", after_init,
                                 "--allreduce", "1,7,33000:float32,bfloat16,int32:sum,max:oi",
                                 "--broadcast", "7,33000:float32:0,-1:o"],
                             VENDORS, timeout=90, port=port)
    job = harness.LiveJob(cmd, env)

    for t in root_strangers:
        t.join(35)
    outcomes = [t.outcome for t in root_strangers]
    suite.check(outcomes == ["closed", "closed"], "the rendezvous root closes garbage and a wrong secret",
                "outcomes (garbage, wrong secret): %s" % outcomes)
    open(before_init, "w").close()

    # Every rank announces its peer listener once it is up.
    def ports():
        found = {}
        for name, text in read_logs(tmp).items():
            for p in _LISTEN.findall(text):
                found.setdefault(name, set()).add(int(p))
        return found if len(found) == N else None

    found = harness.wait_until(ports, 60)
    ok = suite.check(found is not None, "every rank logs 'listening for peers on 127.0.0.1:PORT'",
                     "logs: %s\n%s" % (sorted(read_logs(tmp)), "\n".join(job.text()[0].splitlines()[-20:])))
    peer_strangers = {}
    if ok:
        for name, ps in sorted(found.items()):
            for p in sorted(ps):
                peer_strangers[(name, p)] = strangers_to(p, 0, 20)
        for key, ts in sorted(peer_strangers.items()):
            for t in ts:
                t.join(25)
            outcomes = [t.outcome for t in ts]
            suite.check(outcomes == ["closed", "closed"],
                        "%s's peer listener on port %d closes garbage and a wrong secret" % key,
                        "outcomes (garbage, wrong secret): %s" % outcomes)
    open(after_init, "w").close()

    res = job.finish(120)
    lines = res.lines()
    oks = [r for r in range(N) if any(l.startswith("ok:") for l in lines.get(r, []))]
    print("job: rc %s, %.1f s, ranks ok %s" % (res.rc, res.elapsed, oks), flush=True)
    suite.check(res.rc == 0 and oks == list(range(N)) and not res.timed_out,
                "the job completes with correct results", "rc %s\n%s" % (res.rc, res.tail()))

    logs = read_logs(tmp)
    refusals = {name: [l for l in text.splitlines() if "refused a connection" in l] for name, text in logs.items()}
    on_root = listener_pattern(port)
    root_refusals = [l for ls in refusals.values() for l in ls if on_root.search(l)]
    suite.check(len(root_refusals) >= 2, "the root logs 'refused a connection' for each of its 2 strangers",
                "%d such lines:\n%s" % (len(root_refusals), "\n".join(l for ls in refusals.values() for l in ls)))
    # The premise: the root refused them while it was still gathering ranks.
    for name, text in logs.items():
        ls = text.splitlines()
        joined3 = [i for i, l in enumerate(ls) if re.search(r"rank 3 of 4 joined", l)]
        refused = [i for i, l in enumerate(ls) if "refused a connection" in l and on_root.search(l)]
        if refused:
            suite.check(joined3 and max(refused) < joined3[0],
                        "the root refused its strangers before rank 3 joined", "\n".join(ls[-30:]))
    for (name, p), ts in sorted(peer_strangers.items()):
        on_port = listener_pattern(p)
        mine = [l for l in refusals.get(name, []) if on_port.search(l)]
        suite.check(len(mine) >= len(ts), "%s logs 'refused a connection' for each stranger on port %d" % (name, p),
                    "%d such lines in %s:\n%s" % (len(mine), name, "\n".join(refusals.get(name, []))))
    print("refusals logged: " + ", ".join("%s: %d" % (k, len(v)) for k, v in sorted(refusals.items())))


if __name__ == "__main__":
    main()
