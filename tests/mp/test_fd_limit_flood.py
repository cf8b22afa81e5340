#!/usr/bin/env python3
"""A stranger flood at a common open-file limit does not deny start-up
(#23 item 12).

Every rank runs under `prlimit --nofile=L:L`; while rank 3 waits for a
file (so ranks 0-2 have their peer listeners up and wait for the root's
verdict), the suite opens F idle connections to rank 1's listener, then
lets rank 3 in: rank 1 must still connect to its peers (its own sockets
come out of the half of the limit kept from strangers: os/fdbudget.h) and
every rank checks its all-reduces bit for bit.

Cases: L=1024 with F=1,100 (the issue's flood), L=200 with F=250.
Checks: F connections made; rank 1 logs that strangers reached the
process's budget, L/2 (so the flood passed it); the job exits 0 with "ok:"
from every rank within 15 s of rank 3's start (GPUBRIDGE_TIMEOUT=20: a rank
out of descriptors would make rank 0 wait it out).
"""
import os
import re
import resource
import sys
import tempfile
import shutil
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_stranger_flood import Flood, read_logs  # noqa: E402 (the flood's connections)

N = 4
VENDORS = "nvidia:2,amd:2"
CASES = [(1024, 1100), (200, 250)]
AFTER_GO_S = 15


def rank_log(tmp, name, rank):
    """(text, listening port) of the log of rank `rank` in this case, once it sent its probe."""
    for fname, text in read_logs(tmp).items():
        if fname.startswith(name + "-log.") and re.search(r"rank %d sent its probe" % rank, text):
            m = re.search(r"listening for peers on 127\.0\.0\.1:(\d+)", text)
            return text, int(m.group(1)) if m else None
    return None, None


def run_case(suite, tmp, limit, flood_n):
    name = "nofile%d" % limit
    go = os.path.join(tmp, name + "-go")
    env = harness.clean_env(GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_SUBSYS="INIT,NET,BOOT",
                            GPUBRIDGE_DEBUG_FILE=os.path.join(tmp, name + "-log.%p"), GPUBRIDGE_TIMEOUT=20,
                            GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES="4K")
    prog = [harness.program("rank_collectives"), "--layout", ",".join(harness.vendor_list(VENDORS)),
            "--wait-file", "3:" + go, "--allreduce", "1,7,33000:float32:sum:oi"]
    cmd = ["prlimit", "--nofile=%d:%d" % (limit, limit), "--"] + harness.launch_cmd(N, prog, VENDORS, timeout=90)
    job = harness.LiveJob(cmd, env)
    flood = None
    try:
        port = harness.wait_until(lambda: rank_log(tmp, name, 1)[1], harness.scaled(30))
        if not suite.check(port is not None, "%s: rank 1 logs its peer listener and sends its probe" % name,
                           job.text()[1][-2000:]):
            return
        flood = Flood(port, flood_n, harness.scaled(30))
        flood.run()
        suite.check(len(flood.socks) == flood_n, "%s: %d idle connections to rank 1's listener (%d made)"
                    % (name, flood_n, len(flood.socks)))
        t_go = time.monotonic()
        open(go, "w").close()
        res = job.finish(harness.scaled(AFTER_GO_S) + 30)
        took = time.monotonic() - t_go
    finally:
        if flood:
            flood.stop()
    lines = res.lines()
    oks = [r for r in range(N) if any(l.startswith("ok:") for l in lines.get(r, []))]
    print("%s: rc %s, %.1f s after rank 3 started, ranks ok %s" % (name, res.rc, took, oks), flush=True)
    suite.check(res.rc == 0 and oks == list(range(N)) and took <= harness.scaled(AFTER_GO_S),
                "%s: start-up succeeds and every all-reduce is right within %d s" % (name, AFTER_GO_S),
                "rc %s after %.1f s\n%s" % (res.rc, took, res.tail()))
    text = rank_log(tmp, name, 1)[0] or ""
    held = re.findall(r"(\d+) connections wait for their first message in this process, the most it lets", text)
    suite.check(held and all(int(h) == limit // 2 for h in held),
                "%s: rank 1 keeps at most %d strangers waiting (half the limit), and the flood reached it"
                % (name, limit // 2), "counts logged: %s" % sorted(set(held)))


def main():
    harness.require_built("rank_collectives")
    if not harness.which("prlimit"):
        print("FAIL: prlimit is missing (util-linux)")
        sys.exit(1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * max(f for _, f in CASES) + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    suite = harness.Suite("fd_limit_flood")
    tmp = tempfile.mkdtemp(prefix="gb-fdlimit-")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    try:
        for limit, flood_n in CASES:
            if not only or only in "nofile%d" % limit:
                run_case(suite, tmp, limit, flood_n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    suite.done()


if __name__ == "__main__":
    main()
