#!/usr/bin/env python3
"""gpubridge-perf shows where a long sweep stands: rank 0, and only rank 0,
says on stderr which size of how many runs and the time left. With
--progress 1 under a launcher's pipe: a line per size, each size once, in
order; --progress 0 and the default on a pipe: nothing. On a terminal (a
pseudo-terminal here) by default: one line redrawn, and cleared before each
table row, so no row starts after progress text. A few seconds.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/mp/test_perf_progress.py
"""
import os
import pty
import re
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

suite = harness.Suite("perf progress")
PERF = os.path.join(harness.BUILD_DIR, "bin", "gpubridge-perf")
SWEEP = ["all_reduce", "-b", "1K", "-e", "32K", "-f", "2", "-n", "2", "-w", "0"]
SIZES = [1024 << k for k in range(6)]
LINE = re.compile(r"gpubridge-perf: all_reduce float sum: size (\d+) of (\d+) \((\d+) bytes\)")


def progress_lines(lines):
    return [tuple(int(g) for g in m.groups()) for m in (LINE.search(x) for x in lines) if m]


def test_pipe():
    env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo")
    r = harness.run_job(2, [PERF] + SWEEP + ["--progress", "1"], env, vendors="nvidia,amd", timeout=90)
    by = r.lines()
    want = [(k + 1, len(SIZES), s) for k, s in enumerate(SIZES)]
    got0, got1 = progress_lines(by.get(0, [])), progress_lines(by.get(1, []))
    suite.check(r.rc == 0 and got0 == want and not got1,
                "--progress 1: rank 0 says size k of %d for each size in order, rank 1 says nothing" % len(SIZES),
                "exit %s, rank 0 %s, rank 1 %s\n%s" % (r.rc, got0, got1, r.tail()))
    timed = [x for x in by.get(0, []) if LINE.search(x) and "left" in x]
    suite.check(len(timed) == len(SIZES) - 1, "every size after the first says the time left",
                "%d of %d lines: %s" % (len(timed), len(SIZES) - 1, timed))
    for flag in ([], ["--progress", "0"]):
        r = harness.run_job(2, [PERF] + SWEEP + flag, env, vendors="nvidia,amd", timeout=90)
        got = progress_lines(r.lines().get(0, []))
        suite.check(r.rc == 0 and not got, "%s on a pipe: no progress" % (" ".join(flag) or "the default"),
                    "exit %s, %s" % (r.rc, got))


def test_terminal():
    master, slave = pty.openpty()
    env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo")
    p = subprocess.Popen([PERF] + SWEEP, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                         start_new_session=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + harness.scaled(60)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the program ended
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    rc = p.wait(timeout=30)
    text = out.decode("utf-8", "replace")
    # A row counts only where it starts right after a clear: progress text before it on its line fails.
    rows = [x for x in text.split("\n") if re.match(r"\s+\d+\s+\d+\s+float\s+sum", x.split("\x1b[K")[-1])]
    drawn = LINE.findall(text)
    suite.check(rc == 0 and len(drawn) == len(SIZES) and len(rows) == len(SIZES),
                "on a terminal: the progress line is drawn per size and cleared before each row",
                "exit %s, %d drawn, %d rows after a clear\n%r" % (rc, len(drawn), len(rows), text[-1500:]))


if __name__ == "__main__":
    harness.require_built()
    test_pipe()
    test_terminal()
    suite.done()
