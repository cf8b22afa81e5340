#!/usr/bin/env python3
"""gpubridge-perf says how it timed, in the header and the JSON: device events
only where every rank has them (real GPUs), else the host clock with the
reason; -E 0 asks for the host clock; a bad -E value is refused before init.
Simulated ranks have no device events, so here every run must say host clock
(tests/gpu runs the device-event side)."""
import json
import os
import subprocess
import sys
import tempfile

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "build")
RUN = os.path.join(BUILD, "bin", "gpubridge-run")
PERF = os.path.join(BUILD, "bin", "gpubridge-perf")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what)


def job(extra, json_path):
    cmd = [RUN, "-n", "2", "--vendors", "nvidia:1,amd:1", "--timeout", "60", "--",
           PERF, "all_reduce", "-b", "8", "-e", "64K", "-f", "32", "-n", "2", "-J", json_path] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    return p.returncode, p.stdout + p.stderr


def meta_of(path):
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    metas = [l["meta"] for l in lines if "meta" in l]
    return metas[0] if metas else None, len(lines) - len(metas)


with tempfile.TemporaryDirectory() as tmp:
    for extra, reason in (([], "simulated ranks have no device events"), (["-E", "0"], "-E 0")):
        path = os.path.join(tmp, "perf.json")
        rc, out = job(extra, path)
        check(rc == 0, "gpubridge-perf %s exited %d:\n%s" % (extra, rc, out))
        want = "# timing: host clock (%s)" % reason
        check(want in out, "%s: header line %r missing:\n%s" % (extra, want, out))
        meta, rows = meta_of(path)
        check(meta is not None and meta.get("timing") == "host clock",
              "%s: JSON timing is %r, want 'host clock'" % (extra, meta and meta.get("timing")))
        check(meta is not None and reason in meta.get("timing_detail", ""),
              "%s: JSON timing_detail %r lacks %r" % (extra, meta and meta.get("timing_detail"), reason))
        # 8 B, 256 B, 8 KiB: one JSON row per size.
        check(rows == 3, "%s: %d JSON rows, want 3 (8 B, 256 B, 8 KiB)" % (extra, rows))

# Refused by the option parser, before any rank starts a communicator.
p = subprocess.run([PERF, "all_reduce", "-E", "2"], capture_output=True, text=True, timeout=30)
check(p.returncode == 2, "-E 2 exited %d, want 2" % p.returncode)
check("-E wants 0 (host clock) or 1 (device events); got '2'" in p.stderr, "-E 2 message: %r" % p.stderr)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
