#!/usr/bin/env python3
"""Every tool answers --version, --help and -h alike: exit 0, nothing on
stderr, and on stdout the library's version (the file VERSION, MAJOR.MINOR.PATCH
alone on a line) or its usage. gpubridge-perf prints them once per job (rank 0
under a launcher) and keeps -V as nccl-tests' flag; python -m gpubridge prints
what gpubridge-info prints. No job is started: a few seconds.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/mp/test_tool_flags.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TOOLS = ("run", "perf", "info")
suite = harness.Suite("tool flags")


def tool(name):
    return os.path.join(harness.BUILD_DIR, "bin", "gpubridge-" + name)


def version():
    with open(os.path.join(harness.SOURCE_DIR, "VERSION"), encoding="utf-8") as f:
        return f.read().strip()


def run(cmd, **extra):
    return harness.run(cmd, harness.clean_env(**extra), 30)


def test_flags():
    want = version() + "\n"
    for t in TOOLS:
        r = run([tool(t), "--version"])
        suite.check(r.rc == 0 and r.out == want and r.err == "", "gpubridge-%s --version: %r, exit 0" % (t, want),
                    "exit %s, stdout %r, stderr %r" % (r.rc, r.out, r.err))
        for flag in ("--help", "-h"):
            r = run([tool(t), flag])
            suite.check(r.rc == 0 and r.out.startswith("usage: gpubridge-" + t) and "--version" in r.out
                        and r.err == "", "gpubridge-%s %s: the usage, naming --version, exit 0" % (t, flag),
                        "exit %s, stdout %r, stderr %r" % (r.rc, r.out[:300], r.err))


def test_perf_once_per_job():
    for flag in ("--version", "-h"):
        r = run([tool("perf"), flag], RANK=1)
        suite.check(r.rc == 0 and r.out == "" and r.err == "", "gpubridge-perf %s as rank 1: silent, exit 0" % flag,
                    "exit %s, stdout %r, stderr %r" % (r.rc, r.out, r.err))


def test_perf_capital_v():
    # nccl-tests' -V (--device_cta_count) takes a value; the version is --version only.
    r = run([tool("perf"), "all_reduce", "-V", "1"])
    suite.check(r.rc == 2 and "-V 1: gpubridge-perf takes only -V 0" in r.err,
                "gpubridge-perf -V 1: nccl-tests' device CTA count, refused with exit 2", r.tail())
    r = run([tool("perf"), "all_reduce", "-V"])
    suite.check(r.rc == 2 and "-V needs a value" in r.err, "gpubridge-perf -V: needs a value", r.tail())


def test_python_module():
    pkg = dict(PYTHONPATH=os.path.join(harness.SOURCE_DIR, "python"),
               GPUBRIDGE_LIBRARY=os.path.join(harness.BUILD_DIR, "lib", "libgpubridge.so"))
    for args in ([], ["--version"]):
        direct = run([tool("info")] + args)
        module = harness.run([sys.executable, "-m", "gpubridge"] + args,
                             harness.python_env(harness.clean_env(**pkg)), 60)
        shown = "".join(" " + a for a in args)
        suite.check(direct.rc == 0 and module.rc == 0 and module.out == direct.out and module.out,
                    "python -m gpubridge%s prints what gpubridge-info%s prints" % (shown, shown),
                    "gpubridge-info: exit %s %r\npython -m gpubridge: exit %s %r %r"
                    % (direct.rc, direct.out, module.rc, module.out, module.err[-2000:]))


if __name__ == "__main__":
    missing = [tool(t) for t in TOOLS if not os.access(tool(t), os.X_OK)]
    if missing:
        print("FAIL: not built: %s (build first: make BUILD=...)" % ", ".join(missing))
        sys.exit(1)
    test_flags()
    test_perf_once_per_job()
    test_perf_capital_v()
    test_python_module()
    suite.done()
