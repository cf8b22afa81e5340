#!/usr/bin/env python3
"""One error, one message per rank. A configuration error (here
GPUBRIDGE_VENDOR given GPUBRIDGE_VENDORS' list syntax) is said once on each
rank, by whoever reports the failed call: gpubridge-perf's message for a C
program, the gpubridge.Error of a Python program (no second copy from the
library's log, no warning at the variable's read). The text suggests
GPUBRIDGE_VENDORS; a misspelt variable name is warned about once per rank
with the closest known name. A few seconds.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/mp/test_one_message.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

suite = harness.Suite("one message per rank")
RANKS = 2
BAD = "nvidia:2,amd:2"
PERF = os.path.join(harness.BUILD_DIR, "bin", "gpubridge-perf")
PYTHON_RANK = ("import gpubridge\n"
               "from gpubridge._comm import Communicator\n"
               "Communicator.from_env(timeout_s=30)\n")


def per_rank(result, needle):
    """{rank: number of its lines holding needle}, every rank listed."""
    lines = result.lines()
    return {r: sum(needle in line for line in lines.get(r, [])) for r in range(RANKS)}


def test_bad_vendor(what, prog, env):
    r = harness.run_job(RANKS, prog, env, keep_going=True, timeout=90)
    counts = per_rank(r, "GPUBRIDGE_VENDOR=" + BAD)
    suite.check(r.rc != 0 and not r.timed_out and all(n == 1 for n in counts.values()),
                "%s: GPUBRIDGE_VENDOR=%s is said once on each rank" % (what, BAD),
                "exit %s, mentions per rank %s\n%s" % (r.rc, counts, r.tail()))
    hint = per_rank(r, "did you mean GPUBRIDGE_VENDORS?")
    suite.check(all(n == 1 for n in hint.values()), "%s: the message suggests GPUBRIDGE_VENDORS" % what,
                "per rank %s\n%s" % (hint, r.tail()))
    return r


def test_c_program():
    test_bad_vendor("gpubridge-perf", [PERF, "all_reduce", "-b", "8", "-e", "8"],
                    harness.clean_env(GPUBRIDGE_VENDOR=BAD))


def test_python_program():
    env = harness.python_env(harness.clean_env(GPUBRIDGE_VENDOR=BAD, GPUBRIDGE_LIBRARY=harness.BUILD_DIR,
                                               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "python")))
    r = test_bad_vendor("a Python rank", [sys.executable, "-c", PYTHON_RANK], env)
    named = per_rank(r, "gpubridge.Error: gbInvalidUsage: gpubridge start-up failed")
    suite.check(all(n == 1 for n in named.values()), "a Python rank raises gpubridge.Error with the verdict",
                "per rank %s\n%s" % (named, r.tail()))


def test_misspelt_name():
    r = harness.run_job(RANKS, [PERF, "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"],
                        harness.clean_env(GPUBRIDGE_VENDR="nvidia", GPUBRIDGE_SOCKET_IFNAME="lo"), timeout=90)
    counts = per_rank(r, "unknown variable GPUBRIDGE_VENDR ignored (did you mean GPUBRIDGE_VENDOR?)")
    suite.check(r.rc == 0 and all(n == 1 for n in counts.values()),
                "GPUBRIDGE_VENDR: one warning per rank naming GPUBRIDGE_VENDOR, and the job runs",
                "exit %s, per rank %s\n%s" % (r.rc, counts, r.tail()))


if __name__ == "__main__":
    harness.require_built()
    test_c_program()
    test_python_program()
    test_misspelt_name()
    suite.done()
