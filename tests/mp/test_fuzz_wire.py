"""Wire fuzzer: random, truncated, oversized, slow, idle and replayed messages
against the rendezvous root and the peer listeners, with and without the job
secret, while a job starts and while it runs.

    python3 tests/mp/test_fuzz_wire.py [--seed N] [--root-inputs 400]
        [--peer-seconds 20] [--peer-inputs 3000] [--insiders 1] [--only root|peers|insiders]

The job (rank_soak, nvidia:2,amd:2) gets a GPUBRIDGE_JOB_SECRET this driver
chose, so it knows the secret (bytes and commHash computed as
src/boot/uniqueid.c does) and builds hellos as a rank would.

1. root: rank 3 waits for a file before init, so the root keeps gathering;
   rank 2 reaches the root through a recording relay (its hello and probe
   are captured). --root-inputs strangers go to the root: garbage, the magic
   then garbage, a wrong secret, the secret with another commHash, another
   tag or a probe of another wire version, a hello cut short, megabytes of
   garbage, a byte at a time, and idle connections. Each must be closed by
   the root and logged ("refused a connection from 127.0.0.1:PORT").
2. peers: the ranks run checked mixed collectives for --peer-seconds + 12 s;
   for --peer-seconds, strangers go to every rank's peer listener: the
   kinds above plus hellos with the secret and bad fields (negative rank,
   0 or 1000 sockets, socket index past the count). Each must be closed
   within REFUSE_S (IDLE_S for idle ones) and logged. Replays of a real
   rank's hello (with the secret) may be refused or ignored, but must not
   disturb the job. The job must end with every result correct.
3. insiders: a process of this suite makes a unique id (gbGetUniqueId, so it
   hosts the root and the suite knows the secret) and sends the root,
   before any rank, a probe with the secret: the captured one replayed, and
   mutations (world size -1, 0, 2^30, rank -1 and past the world, random
   bytes). Then the 4 ranks init with GPUBRIDGE_UNIQUE_ID. The root's host
   must not crash; every rank must finish, or fail with a clear error
   within GPUBRIDGE_TIMEOUT + 3 s.
Every input comes from the seed (printed; --seed N replays them).
"""
import ctypes  # noqa: F401 (used by the root host, started as python3 -c)
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
MAGIC = 0x67627269646765
ROOT_TAG, TAG_WORLD = -1, 1
HELLO_BYTES = 64
REFUSE_S = 3.0   # a stranger that sent enough to be judged is closed within this
IDLE_S = 10.0    # the hello deadline of root and listeners
M64 = (1 << 64) - 1


def fnv1a(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def secret_from_text(text):
    """gbBootSecretFromText: four differently seeded FNV-1a passes."""
    out = b""
    for k in range(4):
        out += struct.pack("<Q", fnv1a(text.encode(), 0xcbf29ce484222325 ^ ((0x9e3779b97f4a7c15 * (k + 1)) & M64)))
    return out


def hello(secret, comm_hash, src, tag, sock_index=0, nsocks=1, magic=MAGIC):
    return struct.pack("<Q32sQiiii", magic, secret, comm_hash, src, tag, sock_index, nsocks)


# ------------------------------------------------------------ one stranger

class Outcome:
    def __init__(self, kind, data_len):
        self.kind, self.data_len = kind, data_len
        self.port = None
        self.result = "not started"
        self.seconds = None


def stranger(host, port, data, kind, rng_seed, close_first=False, trickle=False, wait_s=IDLE_S + 5):
    """Connects, sends data (all at once, or a byte at a time), then waits
    for the other side to close (result 'closed'), unless close_first."""
    o = Outcome(kind, len(data))
    rng = random.Random(rng_seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
    except OSError as e:
        o.result = "connect failed: %s" % e
        s.close()
        return o
    o.port = s.getsockname()[1]
    t0 = time.monotonic()
    try:
        if trickle:
            for i in range(len(data)):
                s.sendall(data[i:i + 1])
                time.sleep(rng.uniform(0, 0.02))  # the slow sender being simulated
        elif data:
            s.sendall(data)
    except OSError:
        pass  # the peer may refuse before it has read everything
    if close_first:
        s.close()
        o.result = "closed by us"
        return o
    end = t0 + wait_s
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                o.result = "still open"
                break
            s.settimeout(left)
            if not s.recv(65536):
                o.result = "closed"
                break
    except (ConnectionResetError, BrokenPipeError):
        o.result = "closed"
    except socket.timeout:
        o.result = "still open"
    except OSError as e:
        o.result = "closed (%s)" % e
    finally:
        o.seconds = time.monotonic() - t0
        s.close()
    return o


def garbage(rng, n):
    b = bytearray(rng.randbytes(n))
    if len(b) >= 8 and struct.unpack_from("<Q", b)[0] == MAGIC:
        b[0] ^= 0xFF
    return bytes(b)


def make_inputs(rng, count, secret, comm_hash, to_root, probe_len):
    """[(kind, data, close_first, trickle, must_refuse)] drawn from rng."""
    tag = ROOT_TAG if to_root else TAG_WORLD
    full = HELLO_BYTES + (probe_len if to_root else 0)
    kinds = ["garbage", "magic-garbage", "wrong-secret", "secret-other-hash", "cut-short", "oversized", "trickle"]
    kinds += ["secret-other-tag", "secret-bad-probe"] if to_root else \
        ["secret-negative-rank", "secret-no-sockets", "secret-many-sockets", "secret-index-past-count"]
    out = []
    for _ in range(count):
        k = rng.choice(kinds)
        pad = garbage(rng, max(0, full - HELLO_BYTES) + rng.randrange(0, 256))
        if k == "garbage":
            out.append((k, garbage(rng, rng.randrange(8, 600)), False, False, True))
        elif k == "magic-garbage":
            out.append((k, struct.pack("<Q", MAGIC) + garbage(rng, rng.randrange(full, full + 300)), False, False, True))
        elif k == "wrong-secret":
            out.append((k, hello(garbage(rng, 32), comm_hash, rng.randrange(N), tag) + pad, False, False, True))
        elif k == "secret-other-hash":
            out.append((k, hello(secret, comm_hash ^ (1 + rng.getrandbits(63)), rng.randrange(N), tag) + pad,
                        False, False, True))
        elif k == "secret-other-tag":
            out.append((k, hello(secret, comm_hash, rng.randrange(N), rng.choice([0, 1, 2, 3, -2, 99])) + pad,
                        False, False, True))
        elif k == "secret-bad-probe":
            out.append((k, hello(secret, comm_hash, rng.randrange(N), tag) + garbage(rng, full - HELLO_BYTES + 16),
                        False, False, True))
        elif k == "secret-negative-rank":
            out.append((k, hello(secret, comm_hash, -rng.randrange(1, 1 << 31), tag) + pad, False, False, True))
        elif k == "secret-no-sockets":
            out.append((k, hello(secret, comm_hash, rng.randrange(N), tag, 0, rng.choice([0, -1, -7])), False, False,
                        True))
        elif k == "secret-many-sockets":
            out.append((k, hello(secret, comm_hash, rng.randrange(N), tag, 0, rng.choice([65, 1000, 1 << 30])), False,
                        False, True))
        elif k == "secret-index-past-count":
            ns = rng.randrange(1, 4)
            out.append((k, hello(secret, comm_hash, rng.randrange(N), tag, ns + rng.randrange(3), ns), False, False,
                        True))
        elif k == "cut-short":
            h = hello(secret if rng.random() < 0.5 else garbage(rng, 32), comm_hash, rng.randrange(N), tag) + pad
            out.append((k, h[:rng.randrange(1, full)], True, False, True))
        elif k == "oversized":
            out.append((k, garbage(rng, rng.randrange(64 << 10, 1 << 20)), False, False, True))
        elif k == "trickle":
            out.append((k, garbage(rng, rng.randrange(8, 40)), False, True, True))
    return out


def run_inputs(host, ports, inputs, rng, deadline=None, workers=12, must_close_s=REFUSE_S):
    """Sends every input (to ports chosen by rng) until the deadline; returns [(input, port, Outcome)]."""
    plan = [(inp, rng.choice(ports), rng.randrange(1 << 30)) for inp in inputs]
    results = []
    lock = threading.Lock()

    def one(item):
        inp, port, s = item
        if deadline is not None and time.monotonic() > deadline:
            return
        kind, data, close_first, trickle, _ = inp
        o = stranger(host, port, data, kind, s, close_first, trickle, wait_s=must_close_s + 12)
        with lock:
            results.append((inp, port, o))

    with ThreadPoolExecutor(max_workers=workers) as ex:
        list(ex.map(one, plan))
    return results


def read_logs(d):
    logs = {}
    for name in os.listdir(d):
        if name.startswith("log."):
            with open(os.path.join(d, name), errors="replace") as f:
                logs[name] = f.read()
    return logs


_REFUSED = re.compile(r"refused a connection from 127\.0\.0\.1:(\d+) on [^:]*:(\d+)(?: and (\d+) more)?")


def refused_ports(logs):
    """({(stranger port, listening port)} named by refusal lines, {listening port: strangers counted
    by summary lines only}): past a rate, a line names one stranger and counts the others."""
    named, more = set(), {}
    for text in logs.values():
        for a, b, m in _REFUSED.findall(text):
            named.add((int(a), int(b)))
            if m:
                more[int(b)] = more.get(int(b), 0) + int(m)
    return named, more


def check_refusals(suite, what, results, logs, bound_s, detail_lines=8):
    refused, more = refused_ports(logs)
    not_closed = [(inp[0], port, o.port, o.result, o.seconds) for inp, port, o in results
                  if not inp[2] and not o.result.startswith("closed")]
    slow = [(inp[0], port, o.port, round(o.seconds, 2)) for inp, port, o in results
            if not inp[2] and o.result.startswith("closed") and o.seconds is not None and o.seconds > bound_s and
            inp[0] != "trickle"]
    unnamed = [(inp[0], port, o.port) for inp, port, o in results if o.port and (o.port, port) not in refused]
    # Strangers a summary line counted ("and N more") are logged too, by number.
    by_port = {}
    for x in unnamed:
        by_port.setdefault(x[1], []).append(x)
    unlogged = [x for p, xs in by_port.items() for x in xs[more.get(p, 0):]]
    failed = [(inp[0], o.result) for inp, port, o in results if o.port is None]
    n = len(results)
    suite.check(not failed, "%s: every one of %d strangers connects" % (what, n), "%s" % failed[:detail_lines])
    suite.check(not not_closed, "%s: every stranger is closed by the other side (%d of %d not)" %
                (what, len(not_closed), n), "%s" % not_closed[:detail_lines])
    suite.check(not slow, "%s: every judged stranger is closed within %.0f s (%d slower)" % (what, bound_s, len(slow)),
                "slowest: %s" % sorted(slow, key=lambda x: -x[3])[:detail_lines])
    suite.check(not unlogged, "%s: every stranger is logged as refused, by name or counted (%d of %d not)"
                % (what, len(unlogged), n),
                "%s" % unlogged[:detail_lines])
    kinds = {}
    for inp, _, _ in results:
        kinds[inp[0]] = kinds.get(inp[0], 0) + 1
    print("%s: %d strangers: %s" % (what, n, ", ".join("%s %d" % kv for kv in sorted(kinds.items()))), flush=True)


# ------------------------------------------------------------ relay

class Relay(threading.Thread):
    """Forwards one connection to the root, recording what the client sent."""

    def __init__(self, root_port):
        super().__init__(daemon=True)
        self.root_port = root_port
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.captured = b""
        self.error = None

    def run(self):
        try:
            self.lsock.settimeout(120)
            c, _ = self.lsock.accept()
            end = time.monotonic() + 60
            while True:
                u = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    u.connect(("127.0.0.1", self.root_port))
                    break
                except OSError:
                    u.close()
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.02)  # retry interval of a deadline-bounded wait
            threading.Thread(target=self._pipe, args=(u, c, False), daemon=True).start()
            self._pipe(c, u, True)
        except OSError as e:
            self.error = str(e)
        finally:
            self.lsock.close()

    def _pipe(self, a, b, record):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if record:
                    self.captured += d
                b.sendall(d)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


# ------------------------------------------------------------ parts 1 and 2

def job_env(tmp, secret_text, tag, timeout=60):
    return trials.tagged_env(tag, GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_FILE=os.path.join(tmp, "log.%p"),
                             GPUBRIDGE_TIMEOUT=timeout, GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES="4K", GPUBRIDGE_POLICY="hierarchical",
                             GPUBRIDGE_JOB_SECRET=secret_text)


_LISTEN = re.compile(r"listening for peers on 127\.0\.0\.1:(\d+)")


def main_job(suite, rng, tmp, root_inputs, peer_seconds, peer_inputs, do_root, do_peers):
    secret_text = "fuzz-%d" % rng.getrandbits(48)
    secret = secret_from_text(secret_text)
    comm_hash = fnv1a(secret)
    port = harness.free_port()
    gate = os.path.join(tmp, "go-init")
    relay = Relay(port)
    relay.start()
    tag = trials.new_tag()
    soak_s = peer_seconds + 12 if do_peers else 1
    cmd = harness.launch_cmd(N, [harness.program("rank_soak"), "--layout", ",".join(harness.vendor_list(VENDORS)),
                                 "--seconds", str(soak_s), "--seed", str(rng.randrange(1 << 30)), "--max-count", "5000",
                                 "--wait-file", "3:" + gate, "--root-port-for-rank", "2:%d" % relay.port],
                             VENDORS, timeout=int(soak_s) + 150, port=port)
    job = harness.LiveJob(cmd, job_env(tmp, secret_text, tag))
    capture = None
    try:
        # The root is up once a rank logs that it sent its probe.
        def joined(k):
            return lambda: sum(len(re.findall(r"rendezvous root: rank \d+ of \d+ joined", t))
                               for t in read_logs(tmp).values()) >= k
        up = trials.until(60, joined(1))
        suite.check(bool(up), "the job's root gathers ranks", job.text()[0][-2000:])
        if do_root and up:
            inputs = make_inputs(rng, root_inputs, secret, comm_hash, True, 1024)
            idle = [("idle", b"", False, False, True)] * 3
            t0 = time.monotonic()
            results = run_inputs("127.0.0.1", [port], idle + inputs, rng, workers=12)
            print("root: %d inputs in %.1f s" % (len(results), time.monotonic() - t0), flush=True)
            trials.until(5, joined(3))
            check_refusals(suite, "root while gathering", results, read_logs(tmp), IDLE_S + REFUSE_S)
        trials.until(30, joined(3))
        capture = relay.captured
        open(gate, "w").close()
        if do_peers:
            def ports():
                found = {}
                for name, text in read_logs(tmp).items():
                    m = _LISTEN.search(text)
                    if m:
                        found[name] = int(m.group(1))
                return found if len(found) == N else None
            # Drawn before the listeners are looked up: the job's soak runs a
            # fixed time, and the strangers must all arrive within it.
            inputs = make_inputs(rng, peer_inputs, secret, comm_hash, False, 0)
            found = trials.until(60, ports)
            if suite.check(found is not None, "every rank logs its peer listener", job.text()[0][-2000:]):
                listen = sorted(found.values())
                idle = [("idle", b"", False, False, True)] * 4
                t0 = time.monotonic()
                results = run_inputs("127.0.0.1", listen, idle + inputs, rng, deadline=t0 + peer_seconds, workers=16)
                print("peers: %d inputs in %.1f s" % (len(results), time.monotonic() - t0), flush=True)
                # Replays of real hellos (rank 3 to every lower rank, world tag): insiders, may be held.
                reps = [("replay", hello(secret, comm_hash, 3, TAG_WORLD), True, False, False) for _ in range(8)]
                run_inputs("127.0.0.1", listen[:3], reps, rng, workers=4)
                logs = read_logs(tmp)
                idle_res = [x for x in results if x[0][0] == "idle"]
                check_refusals(suite, "peer listeners while collectives run",
                               [x for x in results if x[0][0] != "idle"], logs, REFUSE_S)
                check_refusals(suite, "peer listeners, idle strangers", idle_res, logs, IDLE_S + REFUSE_S)
        res = job.finish(soak_s + 120)
    finally:
        trials.kill_tagged(tag)
    lines = res.lines()
    oks = [r for r in range(N) if any(l.startswith("ok:") for l in lines.get(r, []))]
    print("job: rc %s, %.1f s, ranks ok %s" % (res.rc, res.elapsed, oks), flush=True)
    for r in range(N):
        print("[%d] %s" % (r, next((l for l in lines.get(r, []) if l.startswith("ok:")), "(no ok line)")))
    suite.check(res.rc == 0 and not res.timed_out and oks == list(range(N)),
                "the job ends with every result correct", "rc %s\n%s" % (res.rc, res.tail(30)))
    return capture


# ------------------------------------------------------------ part 3

ROOT_HOST = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
uid = ctypes.create_string_buffer(128)
r = lib.gbGetUniqueId(uid)
print("uid %d %s" % (r, uid.raw.hex()), flush=True)
sys.stdin.read()
"""


def insider_probes(rng, capture, count_random):
    probe = bytearray(capture[HELLO_BYTES:])
    cases = [("replay of rank 2's probe", bytes(probe))]
    for name, off, val in [("world size -1", 12, -1), ("world size 0", 12, 0), ("world size 2^30", 12, 1 << 30),
                           ("rank -1", 8, -1), ("rank 4 of 4", 8, 4), ("world size -2^31", 12, -(1 << 31))]:
        p = bytearray(probe)
        struct.pack_into("<i", p, off, val)
        cases.append((name, bytes(p)))
    for i in range(count_random):
        p = bytearray(probe)
        for _ in range(rng.randrange(1, 8)):
            p[rng.randrange(8, len(p))] = rng.getrandbits(8)
        cases.append(("random bytes #%d" % i, bytes(p)))
    return cases


def insider_case(suite, tmp, name, probe):
    logdir = os.path.join(tmp, "ins-%d" % abs(hash(name)))
    os.makedirs(logdir, exist_ok=True)
    lib = os.path.join(harness.BUILD_DIR, "lib", "libgpubridge.so")
    tag = trials.new_tag()
    env = trials.tagged_env(tag, GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_FILE=os.path.join(logdir, "log.%p"),
                            GPUBRIDGE_TIMEOUT=4, GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES="4K")
    host = subprocess.Popen([sys.executable, "-c", ROOT_HOST, lib], env=harness.python_env(env), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = host.stdout.readline().split()
        if not suite.check(len(first) == 3 and first[1] == "0", "insider %s: gbGetUniqueId works" % name,
                           "%s %s" % (first, host.stderr.read() if host.poll() is not None else "")):
            return
        raw = bytes.fromhex(first[2])
        port = struct.unpack_from(">H", raw, 10)[0]  # packedId_t: magic, version, family, port, scope, addr, secret
        addr = socket.inet_ntoa(raw[16:20]) if struct.unpack_from("<H", raw, 8)[0] == socket.AF_INET else "127.0.0.1"
        secret = raw[32:64]
        h = hello(secret, fnv1a(secret), struct.unpack_from("<i", probe, 8)[0], ROOT_TAG)
        o = stranger(addr, port, h + probe, "insider", 0, wait_s=3)
        cmd = harness.launch_cmd(N, [harness.program("rank_soak"), "--layout", ",".join(harness.vendor_list(VENDORS)),
                                     "--seconds", "1"], VENDORS, keep_going=True, timeout=40)
        res = harness.run(cmd, trials.tagged_env(tag, GPUBRIDGE_TIMEOUT=4, GPUBRIDGE_CHUNK_BYTES="64K",
                                                 GPUBRIDGE_RING_MIN_BYTES="4K", GPUBRIDGE_POLICY="hierarchical",
                                                 GPUBRIDGE_UNIQUE_ID=raw.hex()), 60)
        lines = res.lines()
        host_alive = host.poll() is None
        verdicts = {}
        for r in range(N):
            ls = lines.get(r, [])
            verdicts[r] = next((l for l in ls if l.startswith("ok:") or l.startswith("init error after")
                                or "FAIL" in l), None)
        print("insider %s: sent %s; rc %s, %.1f s; root host %s; %s" % (
            name, o.result, res.rc, res.elapsed, "alive" if host_alive else "exited %s" % host.returncode,
            "; ".join("[%d] %s" % (r, (v or "(nothing)")[:120]) for r, v in verdicts.items())), flush=True)
        suite.check(host_alive, "insider %s: the root's host survives" % name,
                    "exit status %s\n%s" % (host.returncode, host.stderr.read()[-3000:] if not host_alive else ""))
        for r in range(N):
            v = verdicts[r] or ""
            m = re.match(r"^init error after (\d+\.\d+) s: (.+)$", v)
            good = v.startswith("ok:") or (m is not None and float(m.group(1)) <= 4 + 3 and m.group(2).strip())
            suite.check(good, "insider %s: rank %d finishes, or fails with a clear error within 7 s" % (name, r),
                        "%r\n%s" % (v, res.tail(20)))
        suite.check(not res.timed_out, "insider %s: the job ends" % name, res.tail(20))
    finally:
        try:
            host.stdin.close()
        except OSError:
            pass
        try:
            host.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        trials.kill_tagged(tag)


def main():
    only = trials.arg("only", None)
    root_inputs = trials.arg("root-inputs", 400, int)
    peer_seconds = trials.arg("peer-seconds", 20.0, float)
    peer_inputs = trials.arg("peer-inputs", 3000, int)
    insiders = trials.arg("insiders", 1, int)
    harness.require_built("rank_soak")
    suite = harness.Suite("wire fuzzer")
    seed = trials.seeded("wire fuzzer")
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="gb-fuzz-")
    try:
        capture = main_job(suite, rng, tmp, root_inputs, peer_seconds, peer_inputs,
                           only in (None, "root"), only in (None, "peers"))
        if only in (None, "insiders"):
            if suite.check(capture is not None and len(capture) > HELLO_BYTES + 16,
                           "the relay captured rank 2's hello and probe (%d bytes)" % len(capture or b"")):
                irng = random.Random(rng.randrange(1 << 62))
                for name, probe in insider_probes(irng, capture, 3 * insiders):
                    insider_case(suite, tmp, name, probe)
    finally:
        if trials.arg("keep-logs", None) is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("logs kept in " + tmp)
    suite.done()


if __name__ == "__main__":
    main()
