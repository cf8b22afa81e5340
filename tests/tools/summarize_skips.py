#!/usr/bin/env python3
"""The end of `make test`: which tests did not run and why, and the verdict.

Reads the JUnit file CTest wrote (`ctest --output-junit`): a test that exited
77 (SKIP_RETURN_CODE) is "notrun" there, with its labels and its output, whose
last line starting with "SKIP" gives the reason (the suites print
`SKIP: reason` before they exit 77). Only the GPU suites may skip (a machine
without a GPU cannot run them): those labelled gpu, and those named
test_gpu_* in any folder (python/test_gpu_backend). Any other skipped test
fails `make test`, since everything it needs is installed by `make test`.
Checks skipped inside suites that passed (lines starting with "SKIP") are
listed too, for information. For each failed test, its lines starting with
"FAIL" (the first 12, each once; else its output's last lines) and any line
naming a replay are repeated, so the end of a log that is cut in the middle
still says which check failed.

usage: summarize_skips.py JUNIT_XML [--ctest-rc N] [--may-skip LABEL ...] [--may-skip-name REGEX]
                          [--name "make test"]
Exit status: 0 when CTest passed (--ctest-rc 0) and no test outside the
--may-skip labels (default: gpu) and --may-skip-name names
(default: (^|/)test_gpu_) skipped; 1 otherwise; 2 when JUNIT_XML
cannot be read.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

GPU_NAMES = r"(^|/)test_gpu_"


def skip_lines(text):
    return [line.strip() for line in (text or "").splitlines() if line.startswith("SKIP")]


FAIL_LINES = 12
TAIL_LINES = 6


def fail_lines(text):
    """What a failed test's output says failed: its FAIL lines and replay lines, each once (the
    tests/mp suites print their failed checks again before their count), else its last lines."""
    lines = (text or "").splitlines()
    fails = list(dict.fromkeys(line for line in lines if line.startswith("FAIL") or "replay:" in line))[:FAIL_LINES]
    return [line[:400] for line in (fails or lines[-TAIL_LINES:])]


def reason_of(line):
    """'SKIP: mpirun not installed' -> 'mpirun not installed'."""
    return line[len("SKIP"):].lstrip(" :") or line


def read_tests(path):
    """One dict per test case: name, status (passed, failed, skipped), labels, reason, skips, fails."""
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        labels = []
        for prop in case.iter("property"):
            if prop.get("name") == "cmake_labels" and prop.get("value"):
                labels = prop.get("value").split(";")
        out = case.findtext("system-out") or ""
        status = {"run": "passed", "notrun": "skipped", "disabled": "skipped"}.get(case.get("status"), "failed")
        lines = skip_lines(out)
        reason = ""
        if status == "skipped":
            skipped = case.find("skipped")
            ctest_says = skipped.get("message", "") if skipped is not None else ""
            reason = reason_of(lines[-1]) if lines else "no SKIP line in its output (CTest: %s)" % (
                ctest_says or case.get("status"))
        tests.append({"name": case.get("name"), "status": status, "labels": labels, "reason": reason,
                      "skips": lines if status == "passed" else [],
                      "fails": fail_lines(out) if status == "failed" else []})
    return tests


def summarize(tests, ctest_rc, may_skip, may_skip_name=GPU_NAMES, name="make test"):
    """(lines to print, exit status)."""
    count = {s: sum(1 for t in tests if t["status"] == s) for s in ("passed", "failed", "skipped")}
    skipped = [t for t in tests if t["status"] == "skipped"]
    refused = [t for t in skipped
               if not set(t["labels"]) & set(may_skip) and not re.search(may_skip_name, t["name"])]
    width = max([len(t["name"]) for t in tests] + [0])
    out = []
    if skipped:
        out.append("Skipped: %d of %d tests (only GPU suites may skip):" % (len(skipped), len(tests)))
        for t in skipped:
            mark = "  NOT ALLOWED" if t in refused else ""
            out.append("  %-*s  %s%s" % (width, t["name"], t["reason"], mark))
    inner = [(t["name"], line) for t in tests for line in t["skips"]]
    if inner:
        out.append("Checks skipped inside suites that passed:")
        out += ["  %-*s  %s" % (width, test, line) for test, line in inner]
    failed = [t for t in tests if t["fails"]]
    if failed:
        out.append("What the failed tests say failed (their FAIL lines, else their last lines):")
        out += ["  %-*s  %s" % (width, t["name"], line) for t in failed for line in t["fails"]]
    out.append("tests: %d passed, %d failed, %d skipped" % (count["passed"], count["failed"], count["skipped"]))
    if not tests:
        out.append("%s: FAILED: CTest ran no test" % name)
        return out, 1
    if refused:
        out.append("%s: FAILED: %s skipped; only GPU suites may skip. Each reason above names what is "
                   "missing: install it (tests/README.md says what make test installs) and run %s again."
                   % (name, ", ".join(t["name"] for t in refused), name))
        return out, 1
    if ctest_rc != 0:
        out.append("%s: FAILED: CTest exited %d (its list of failed tests is above)" % (name, ctest_rc))
        return out, 1
    return out, 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("junit")
    p.add_argument("--ctest-rc", type=int, default=0)
    p.add_argument("--may-skip", nargs="+", default=["gpu"], metavar="LABEL")
    p.add_argument("--may-skip-name", default=GPU_NAMES, metavar="REGEX")
    p.add_argument("--name", default="make test", help="what the verdict line names")
    a = p.parse_args(argv)
    try:
        tests = read_tests(a.junit)
    except (OSError, ET.ParseError) as e:
        print("%s: FAILED: cannot read CTest's JUnit file %s (%s); CTest 3.21 or newer writes it "
              "with --output-junit" % (a.name, a.junit, e))
        return 2
    lines, rc = summarize(tests, a.ctest_rc, a.may_skip, a.may_skip_name, a.name)
    print("\n".join(lines), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
