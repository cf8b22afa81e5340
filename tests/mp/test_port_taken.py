#!/usr/bin/env python3
"""A rendezvous port that another program holds fails the job at once, on
every rank, naming the port and what to do (#23 item 4).

Ranks are started as torchrun without its store would start them (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; no gpubridge-run, which refuses a
taken --port before starting anything: tests/mp/test_run.py), with
GPUBRIDGE_TIMEOUT=20, while the suite holds MASTER_PORT with:

- a listener that never accepts (the kernel still completes each connect):
  ranks 1-3 reach it and must hear no acknowledgement from it;
- a listener that accepts and closes at once (as another job's root does
  with a stranger's probe).

Every rank must exit non-zero within 2 s of its start, its init error must
name 127.0.0.1:PORT, and the first WARN line it writes must be the real
cause: the taken port on rank 0 (the bind), "is not this job's rendezvous
root" on the others; nothing may speak of a missing verdict.
"""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
LIMIT_S = 2.0


def hold_port(mode):
    """A socket listening on a free port of 127.0.0.1; with mode 'close', a
    thread accepts each connection and closes it at once."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", harness.free_port()))
    s.listen(64)
    if mode == "close":
        def serve():
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return  # the suite closed the socket
                c.close()
        threading.Thread(target=serve, daemon=True).start()
    return s


def start_ranks(port):
    procs = []
    for r in range(N):
        env = harness.clean_env(RANK=r, WORLD_SIZE=N, LOCAL_RANK=r, LOCAL_WORLD_SIZE=N, MASTER_ADDR="127.0.0.1",
                                MASTER_PORT=port, GPUBRIDGE_TIMEOUT=20,
                                GPUBRIDGE_VENDOR="nvidia" if r < N // 2 else "amd")
        procs.append((time.monotonic(), subprocess.Popen([harness.program("rank_init")], env=env,
                                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                                         errors="replace", stdin=subprocess.DEVNULL)))
    return procs


def finish(procs, limit):
    """[(rc, seconds from its start, stdout, stderr)]; a rank still running
    at its start + limit is killed (rc None)."""
    out = []
    for t0, p in procs:
        try:
            p.wait(timeout=max(0.0, t0 + limit - time.monotonic()))
            took = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            took = None
            p.kill()
            p.wait(timeout=30)
        o, e = p.communicate(timeout=30)
        out.append((p.returncode if took is not None else None, took, o, e))
    return out


def run_case(suite, mode):
    holder = hold_port(mode)
    port = holder.getsockname()[1]
    addr = "127.0.0.1:%d" % port
    try:
        results = finish(start_ranks(port), harness.scaled(LIMIT_S) + 20)
    finally:
        holder.close()
    for r, (rc, took, out, err) in enumerate(results):
        what = "%s: rank %d" % (mode, r)
        detail = "rc %s after %s s\nstdout: %s\nstderr: %s" % (rc, took, out[-1500:], err[-2500:])
        suite.check(rc not in (None, 0) and took <= harness.scaled(LIMIT_S),
                    "%s fails within %.0f s of its start (took %s s)" % (what, LIMIT_S, "%.2f" % took if took else "-"),
                    detail)
        errors = [l[len("init-error: "):] for l in out.splitlines() if l.startswith("init-error: ")]
        text = errors[0] if errors else ""
        suite.check(addr in text and "ss -ltnp 'sport = :%d'" % port in text,
                    "%s: its error names %s and how to find who holds it" % (what, addr), detail)
        warns = [l for l in err.splitlines() if " WARN " in l]
        first = warns[0] if warns else ""
        want = "bind: Address already in use" if r == 0 else "is not this job's rendezvous root"
        suite.check(addr in first and want in first, "%s: the first WARN is the cause (%s)" % (what, want), detail)
        suite.check("verdict" not in out + err, "%s: nothing speaks of a missing verdict" % what, detail)
        if r > 0:
            suite.check("rank 0 could not listen there" in text, "%s: says rank 0 could not listen there" % what,
                        detail)
    print("%s: ranks took %s s" % (mode, ", ".join("%.2f" % t if t else "-" for _, t, _, _ in results)), flush=True)


def main():
    harness.require_built("rank_init")
    suite = harness.Suite("port_taken")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    for mode in ("silent", "close"):
        if not only or only in mode:
            run_case(suite, mode)
    suite.done()


if __name__ == "__main__":
    main()
