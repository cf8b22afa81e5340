#!/usr/bin/env python3
"""gpubridge-perf --phases: rank 0's mean time per phase of a call (check,
island, wait, bridge, after), read from its flight recorder. The phases follow
each other, so on rank 0 (-a 0) they must lie inside the row's time per call
(2% slack) and cover at least half of it, out of place and in place, with -z 0
(calls queued back to back; on an idle machine they cover 98-100%) and -z 1
(the time also holds the host's synchronize after each call). Rank 0 leads its
island, so every call has a bridge step and its bridge phase is not zero. The
table has the ten phase columns, the JSON a `phases` object per form naming
how many records it averaged (the -n timed calls). Without a recorder
(GPUBRIDGE_TRACE_BUFFER=0) every rank stops with exit 2 and the reason;
--tune --phases is refused before init."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PHASES = ("check", "island", "wait", "bridge", "after")
ITERS = 20
SIZES = (65536, 262144, 1048576)  # -b 64K -e 1M -f 4

suite = harness.Suite("perf_phases")
harness.require_built()
perf = os.path.join(harness.BUILD_DIR, "bin", "gpubridge-perf")
if not os.access(perf, os.X_OK):
    print("FAIL: not built: %s (build first: make BUILD=...)" % perf)
    sys.exit(1)


def job(tmp, blocking, env=None, keep_going=False):
    path = os.path.join(tmp, "phases-z%d.json" % blocking)
    args = [perf, "all_reduce", "-b", "64K", "-e", "1M", "-f", "4", "-n", str(ITERS), "-w", "2", "-c", "1",
            "-a", "0", "-z", str(blocking), "--phases", "-J", path]
    res = harness.run_job(2, args, env or harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo"), vendors="nvidia:1,amd:1",
                          keep_going=keep_going, launcher_timeout=120, timeout=150)
    return res, path


def rows_of(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [r for r in lines if "meta" not in r]


with tempfile.TemporaryDirectory(prefix="gbperf-phases-") as tmp:
    for blocking in (0, 1):
        res, path = job(tmp, blocking)
        tag = "-z %d" % blocking
        if not suite.check(res.rc == 0, "%s: gpubridge-perf --phases exits 0" % tag, res.tail()):
            continue
        lines = [line.split("] ", 1)[1] if line.startswith("[0] ") else line for line in res.out.splitlines()]
        heads = [line for line in lines if line.startswith("#") and "redop" in line]
        suite.check(len(heads) == 1 and heads[0].split()[-10:] == list(PHASES) * 2,
                    "%s: the header names the phase columns twice (out of place, in place)" % tag, "\n".join(heads))
        table = [line.split() for line in lines if line.strip()[:1].isdigit()]
        # size count type redop root, 4 columns per form, 5 phases per form, "simulated".
        suite.check(len(table) == len(SIZES) and all(len(r) == 5 + 8 + 10 + 1 for r in table),
                    "%s: %d table rows of 24 columns" % (tag, len(SIZES)), "\n".join(" ".join(r) for r in table))
        with open(path) as f:
            meta = json.loads(f.readline()).get("meta", {})
        suite.check(meta.get("phases") is True, "%s: the JSON metadata says phases" % tag, str(meta)[:300])
        rows = rows_of(path)
        suite.check([r["size_bytes"] for r in rows] == list(SIZES), "%s: one JSON row per size" % tag,
                    str([r["size_bytes"] for r in rows]))
        for row in rows:
            for form in ("out_of_place", "in_place"):
                half = row[form]
                ph = half.get("phases")
                what = "%s: %d B %s" % (tag, row["size_bytes"], form)
                if not suite.check(isinstance(ph, dict) and ph.get("rank") == 0 and ph.get("records") == ITERS,
                                   what + ": phases of rank 0 over the %d timed calls" % ITERS, str(ph)):
                    continue
                values = [ph["%s_us" % p] for p in PHASES]
                total = sum(values)
                # On one host the streams hand chunks over themselves (or run an
                # exchange) and the proxy only watches: it may see the bridge end
                # after the stream was done, which the record shows as 0.
                suite.check(all(v >= 0 for v in values) and ph["island_us"] > 0,
                            what + ": island phase above 0, none negative", str(ph))
                # The phases follow each other: they never add up to more than the time. They
                # cover it unless the host thread was descheduled between calls (a busy
                # machine) or, with -z 1, synchronized after each call: neither is any phase.
                suite.check(0.5 * half["time_us"] <= total <= 1.02 * half["time_us"],
                            what + ": phases lie inside the time and cover most of it (%.1f us of %.1f us)"
                            % (total, half["time_us"]), str(ph))

    env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo", GPUBRIDGE_TRACE_BUFFER="0")
    # Every rank exits 2 by itself: the launcher must not stop the slower one first.
    res, _ = job(tmp, 0, env, keep_going=True)
    suite.check(res.rc == 2 and "--phases reads the flight recorder, which rank 0 cannot" in res.err
                and "GPUBRIDGE_TRACE_BUFFER" in res.err,
                "GPUBRIDGE_TRACE_BUFFER=0: every rank stops with exit 2 and the reason", res.tail())

res = harness.run([perf, "all_reduce", "--tune", os.devnull, "--phases"], harness.clean_env(), 30)
suite.check(res.rc == 2 and "--tune and --phases are separate runs" in res.err, "--tune --phases is refused",
            res.err)
suite.done()
