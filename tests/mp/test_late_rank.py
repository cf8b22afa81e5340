#!/usr/bin/env python3
"""A rank that comes late to a collective, against the communicator's own
timeout (gbConfig_t.timeoutSeconds, which the torch backend fills from
init_process_group's timeout) when GPUBRIDGE_TIMEOUT in the environment is
lower. Every wait of the collective, the host stream's included, must follow
the communicator's timeout: a rank 8 s late is waited for under a 30 s
timeout (the environment says 1 s), and a 3 s timeout fails it on time with a
timeout error (simulated ranks: 2 in 2 islands, 3 in 2 islands)."""
import re

import harness

LATE = 8.0


def case(suite, n, vendors, timeout, expect_ok):
    name = "n=%d %s, config timeout %d s, environment 1 s, last rank %g s late" % (n, vendors, timeout, LATE)
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=1)
    res = harness.run_job(n, [harness.program("rank_late"), "--timeout", str(timeout), "--late", str(LATE)], env,
                          vendors=vendors, timeout=120)
    lines = res.lines()
    first = [l for l in lines.get(0, []) if l.startswith(("ok after", "error after", "rank 0: FAIL"))]
    seconds = None
    if first:
        m = re.match(r"(ok|error) after ([0-9.]+) s", first[0])
        seconds = float(m.group(2)) if m else None
    if expect_ok:
        ok = res.rc == 0 and all(any(l.startswith("ok after") for l in lines.get(r, [])) for r in range(n))
        # Rank 0 waited for the late rank: at least most of LATE seconds.
        ok = ok and seconds is not None and seconds >= LATE - 1.0
        suite.check(ok, name + ": every rank finished with the right sum" +
                    (" (rank 0 waited %.2f s)" % seconds if seconds is not None else ""), res.tail())
    else:
        text = first[0] if first else ""
        ok = res.rc != 0 and text.startswith("error after") and seconds is not None and seconds < LATE - 1.0
        ok = ok and ("timeout" in text.lower() or "within" in text.lower())
        suite.check(ok, name + ": rank 0 failed with a timeout before the late rank came (%r)" % text[:160],
                    res.tail())


def main():
    suite = harness.Suite("test_late_rank")
    harness.require_built("rank_late")
    case(suite, 2, "nvidia:1,amd:1", 30, True)
    case(suite, 3, "nvidia:2,amd:1", 30, True)
    case(suite, 2, "nvidia:1,amd:1", 3, False)
    suite.done()


if __name__ == "__main__":
    main()
