"""Start-up validation: every rule that makes init fail must fail on EVERY rank
with byte-identical text that names the rank at fault.

Each case runs a 4-rank job (nvidia:2,amd:2) of tests/rank_init, with
`--env-for-rank R NAME=VALUE` changing one rank's environment before init.
Each rank prints "init-error: <text>"; the driver compares the texts after the
launcher's "[r] " prefix.

    python3 tests/mp/test_validation.py [--only SUBSTRING]
"""
import os
import re
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
TIMEOUT = 10  # GPUBRIDGE_TIMEOUT: nothing waits long

# (name, overrides [(rank, "NAME=VALUE")], base env, rank(s) at fault or None,
#  words the text must contain)
CASES = [
    ("world size differs on rank 3", [(3, "WORLD_SIZE=5")], {}, 3, ["WORLD_SIZE"]),
    ("policy differs on rank 1", [(1, "GPUBRIDGE_POLICY=flat")], {}, 1, ["GPUBRIDGE_POLICY"]),
    ("chunk bytes differ on rank 2", [(2, "GPUBRIDGE_CHUNK_BYTES=128K")], {}, 2, ["GPUBRIDGE_CHUNK_BYTES"]),
    ("sockets per peer differ on rank 1", [(1, "GPUBRIDGE_NSOCKS_PERPEER=3")], {}, 1,
     ["GPUBRIDGE_NSOCKS_PERPEER"]),
    ("ring threshold differs on rank 3", [(3, "GPUBRIDGE_RING_MIN_BYTES=8K")], {}, 3,
     ["GPUBRIDGE_RING_MIN_BYTES"]),
    ("timeout differs on rank 2", [(2, "GPUBRIDGE_TIMEOUT=%d" % (TIMEOUT + 1))], {}, 2, ["GPUBRIDGE_TIMEOUT"]),
    ("bridge compression differs on rank 1", [(1, "GPUBRIDGE_BRIDGE_COMPRESSION=fp8")], {}, 1,
     ["GPUBRIDGE_BRIDGE_COMPRESSION"]),
    ("duplicate rank: rank 3 claims 2", [(3, "RANK=2")], {}, 2, ["RANK"]),
    ("invalid GPUBRIDGE_POLICY on rank 2", [(2, "GPUBRIDGE_POLICY=bogus")], {}, 2, ["GPUBRIDGE_POLICY", "bogus"]),
    ("invalid GPUBRIDGE_TIMEOUT on rank 1", [(1, "GPUBRIDGE_TIMEOUT=abc")], {}, 1, ["GPUBRIDGE_TIMEOUT", "abc"]),
    ("invalid GPUBRIDGE_CHUNK_BYTES on rank 3", [(3, "GPUBRIDGE_CHUNK_BYTES=12Q")], {}, 3,
     ["GPUBRIDGE_CHUNK_BYTES", "12Q"]),
    ("invalid GPUBRIDGE_VENDOR on rank 1", [(1, "GPUBRIDGE_VENDOR=Bad!")], {}, 1, ["GPUBRIDGE_VENDOR", "Bad!"]),
    ("policy differs on rank 0, the root's host", [(0, "GPUBRIDGE_POLICY=hierarchical")], {}, 0,
     ["GPUBRIDGE_POLICY"]),
    ("invalid values on two ranks", [(1, "GPUBRIDGE_POLICY=bogus"), (3, "GPUBRIDGE_CHUNK_BYTES=12Q")], {}, [1, 3],
     ["GPUBRIDGE_POLICY", "bogus", "GPUBRIDGE_CHUNK_BYTES", "12Q"]),
    ("policy native with two islands", [], {"GPUBRIDGE_POLICY": "native"}, None, ["native", "GPUBRIDGE_POLICY"]),
]

# A bad launcher variable on one rank: that rank reports it to the root, so
# every rank fails within seconds (FAST_S), not after GPUBRIDGE_TIMEOUT.
FAST_S = 6
LAUNCHER_CASES = [
    ("unreadable RANK on rank 2", [(2, "RANK=abc")], {}, 2, ["RANK=abc"]),
    ("RANK beyond WORLD_SIZE on rank 1", [(1, "RANK=9")], {}, 1, ["RANK=9", "WORLD_SIZE=4"]),
    ("unreadable WORLD_SIZE on rank 3", [(3, "WORLD_SIZE=four")], {}, 3, ["WORLD_SIZE=four"]),
    ("WORLD_SIZE 0 on rank 2", [(2, "WORLD_SIZE=0")], {}, 2, ["WORLD_SIZE=0"]),
    ("unreadable WORLD_SIZE on rank 0, the root's host", [(0, "WORLD_SIZE=x")], {}, 0, ["WORLD_SIZE=x"]),
    ("a second RANK=0 (rank 2)", [(2, "RANK=0")], {}, 0, ["RANK=0", "MASTER_PORT"]),
    ("RANK without WORLD_SIZE on rank 2", [(2, "WORLD_SIZE=")], {}, 2, ["RANK is set but WORLD_SIZE is not"]),
    ("WORLD_SIZE without RANK on rank 1", [(1, "RANK=")], {}, 1, ["WORLD_SIZE is set but RANK is not"]),
    ("unreadable LOCAL_RANK on rank 3", [(3, "LOCAL_RANK=x")], {}, 3, ["LOCAL_RANK=x"]),
    ("LOCAL_RANK past LOCAL_WORLD_SIZE on rank 1", [(1, "LOCAL_RANK=7")], {}, 1,
     ["LOCAL_RANK=7", "LOCAL_WORLD_SIZE=4"]),
    ("malformed GPUBRIDGE_UNIQUE_ID on rank 1", [(1, "GPUBRIDGE_UNIQUE_ID=12ab")], {}, 1,
     ["GPUBRIDGE_UNIQUE_ID holds 4 characters, not 256 hex digits"]),
]

def names_alone(text, rank):
    """Whether text names rank on its own ("rank 3 uses 5", "rank 3 (pid ..."),
    not merely inside a list of the ranks that agree."""
    return re.search(r"\brank %d\b" % rank, text) is not None


def run_case(overrides, extra_env):
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=TIMEOUT, **extra_env)
    args = [harness.program("rank_init")]
    for r, assign in overrides:
        args += ["--env-for-rank", str(r), assign]
    return harness.run_job(N, args, env, vendors=VENDORS, keep_going=True, launcher_timeout=4 * TIMEOUT,
                           timeout=6 * TIMEOUT)


def retry(suite):
    """Init fails (WORLD_SIZE unreadable on rank 1), then every rank retries
    at once with the same MASTER_PORT and no override: the retry must succeed
    on every rank, well within the timeout (no rank may reach the first
    root, which must stop listening before its verdict)."""
    rounds = 5
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=TIMEOUT)
    args = [harness.program("rank_init"), "--retries", str(rounds), "--env-for-rank", "1", "WORLD_SIZE=x"]
    res = harness.run_job(N, args, env, vendors=VENDORS, keep_going=True, launcher_timeout=4 * TIMEOUT,
                          timeout=6 * TIMEOUT)
    lines = res.lines()
    oks = {r: sum(l.startswith("init-ok") for l in lines.get(r, [])) for r in range(N)}
    ok = [r for r in range(N) if oks[r] == rounds]
    failed = {r: sum(l.startswith("init-error") for l in lines.get(r, [])) for r in range(N)}
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    print("retry after a failed init: %.1f s, ok %s, failures per rank %s" % (res.elapsed, ok, failed), flush=True)
    suite.check(res.rc == 0 and ok == list(range(N)), "retry after a failed init: every retry succeeds (%d rounds)"
                % rounds, detail)
    suite.check(all(f == rounds for f in failed.values()), "retry after a failed init: each first try fails", detail)
    suite.check(res.elapsed < TIMEOUT, "retry after a failed init: done within the timeout (%d s)" % TIMEOUT, detail)


def bad_config(suite):
    """Rank 2 passes a gbConfig_t whose timeoutSeconds is 0: it gets
    gbInvalidArgument at once, naming the field, before anything is started
    or sent (NCCL's rule for an argument); the other ranks, as in NCCL, wait
    for it until their timeout and then name rank 2."""
    name = "bad gbConfig_t on rank 2"
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=TIMEOUT)
    args = [harness.program("rank_init"), "--bad-config-for-rank", "2"]
    res = harness.run_job(N, args, env, vendors=VENDORS, keep_going=True, launcher_timeout=4 * TIMEOUT,
                          timeout=6 * TIMEOUT)
    lines = res.lines()
    texts = {r: [l[len("init-error: "):] for l in lines.get(r, []) if l.startswith("init-error: ")] for r in range(N)}
    codes = {r: [l for l in lines.get(r, []) if l.startswith("init-result: ")] for r in range(N)}
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    print("%s: %.1f s: rank 0: %s; rank 2: %s" % (name, res.elapsed, texts[0], texts[2]), flush=True)
    suite.check(all(texts[r] for r in range(N)), name + ": every rank fails init", detail)
    suite.check(codes[2] == ["init-result: %d" % 4], name + ": rank 2 gets gbInvalidArgument (4)", str(codes))
    suite.check(bool(texts[2]) and "config.timeoutSeconds" in texts[2][0], name + ": rank 2's text names the field",
                str(texts[2]))
    suite.check(all(texts[r] and names_alone(texts[r][0], 2) for r in (0, 1, 3)),
                name + ": the other ranks' text names rank 2", str(texts))
    suite.check(res.rc != 0 and not res.timed_out and res.elapsed < 3 * TIMEOUT,
                name + ": the job ends within the timeout's bound", detail)


def unique_id_hex(port, secret):
    """GPUBRIDGE_UNIQUE_ID for a root at 127.0.0.1:port with this secret
    (src/boot/uniqueid.c's layout: magic, version, family, port, scope,
    address, secret; 128 bytes)."""
    packed = struct.pack("<IIH", 0x67624964, 1, socket.AF_INET) + struct.pack(">H", port) + struct.pack("<I", 0)
    packed += socket.inet_aton("127.0.0.1") + bytes(12) + secret
    return (packed + bytes(128 - len(packed))).hex()


def refused(suite, what, assign, port=None):
    """Rank 1 holds another job secret (what): the root refuses it and says
    so, and rank 1's text gives that cause, not a failed root; the others
    wait for rank 1 until the timeout and name it."""
    name = "%s on rank 1" % what
    timeout = 3
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=timeout, GPUBRIDGE_JOB_SECRET="the job's secret")
    args = [harness.program("rank_init"), "--env-for-rank", "1", assign]
    res = harness.run_job(N, args, env, vendors=VENDORS, keep_going=True, launcher_timeout=8 * timeout, port=port,
                          timeout=10 * timeout)
    lines = res.lines()
    texts = {r: [l[len("init-error: "):] for l in lines.get(r, []) if l.startswith("init-error: ")] for r in range(N)}
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    mine = texts[1][0] if texts[1] else ""
    print("%s: %.1f s: rank 1: %s" % (name, res.elapsed, mine), flush=True)
    suite.check("wrong job secret" in mine, name + ": rank 1 says the root refused a wrong job secret", detail)
    suite.check("GPUBRIDGE_JOB_SECRET" in mine and "GPUBRIDGE_UNIQUE_ID" in mine,
                name + ": rank 1's text names what to make equal", mine)
    suite.check("may have failed" not in mine and "aborted" not in mine,
                name + ": rank 1 does not blame a failed root", mine)
    suite.check(all(texts[r] and names_alone(texts[r][0], 1) for r in (0, 2, 3)),
                name + ": the other ranks name rank 1", str(texts))
    suite.check(res.rc != 0 and not res.timed_out, name + ": the job ends with a failure", detail)


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    harness.require_built("rank_init")
    suite = harness.Suite("validation")

    if not only:
        res = run_case([], {})
        lines = res.lines()
        ok = [r for r in range(N) if any(l.startswith("init-ok") for l in lines.get(r, []))]
        suite.check(res.rc == 0 and ok == list(range(N)), "control: a consistent job initialises on every rank",
                    "rc %s, ranks ok %s\n%s" % (res.rc, ok, res.tail()))

    for name, overrides, extra_env, fault, words in CASES + LAUNCHER_CASES:
        if only and only not in name:
            continue
        fast = (name, overrides, extra_env, fault, words) in LAUNCHER_CASES
        res = run_case(overrides, extra_env)
        lines = res.lines()
        texts = {}
        for r in range(N):
            errs = [l[len("init-error: "):] for l in lines.get(r, []) if l.startswith("init-error: ")]
            if errs:
                texts[r] = errs[0]
        results = {r: [l for l in lines.get(r, []) if l.startswith("init-result: ")] for r in range(N)}
        detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
        print("%s: %.1f s: %s" % (name, res.elapsed, texts.get(0, "(rank 0 printed no init-error)")), flush=True)
        suite.check(sorted(texts) == list(range(N)), name + ": every rank fails init", detail)
        distinct = set(texts.values())
        suite.check(len(distinct) == 1, name + ": byte-identical text on every rank",
                    "\n".join("[%d] %s" % (r, t) for r, t in sorted(texts.items())))
        suite.check(len({tuple(v) for v in results.values()}) == 1, name + ": the same result code on every rank",
                    str(results))
        text = texts.get(0, "")
        faults = [] if fault is None else fault if isinstance(fault, list) else [fault]
        for f in faults:
            suite.check(names_alone(text, f), name + ": the text names rank %d" % f, text)
        missing = [w for w in words if w not in text]
        suite.check(not missing, name + ": the text mentions %s" % ", ".join(words), "missing %s in: %s" % (
            missing, text))
        suite.check(res.rc != 0 and not res.timed_out and res.elapsed < 3 * TIMEOUT,
                    name + ": the job ends promptly with a failure", detail)
        if fast:
            suite.check(res.elapsed < harness.scaled(FAST_S), name + ": every rank fails within %d s (the timeout is %d)"
                        % (FAST_S, TIMEOUT), detail)

    if not only or only in "retry after a failed init":
        retry(suite)
    if not only or only in "bad gbConfig_t on rank 2":
        bad_config(suite)
    if not only or only in "wrong job secret on rank 1":
        refused(suite, "wrong job secret", "GPUBRIDGE_JOB_SECRET=another secret")
    if not only or only in "wrong unique id on rank 1":
        port = harness.free_port()
        refused(suite, "wrong unique id", "GPUBRIDGE_UNIQUE_ID=" + unique_id_hex(port, os.urandom(32)), port=port)
    suite.done()


if __name__ == "__main__":
    main()
