#!/usr/bin/env python3
"""The end of `make test` (tests/tools/summarize_skips.py) on JUnit files that
a real CTest writes for a small project: a suite that skips without a GPU is
allowed (labelled gpu, or named test_gpu_*), any other skip fails with the suite's reason, a failed CTest fails
and its FAIL lines (else its last lines) are repeated at the end, each once, checks skipped inside a passing
suite are listed, and a missing file fails."""
import os
import shutil
import subprocess
import sys
import tempfile

source = os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(source, "tests", "tools", "summarize_skips.py")

PROJECT = r"""cmake_minimum_required(VERSION 3.18)
project(skips NONE)
enable_testing()
add_test(NAME ok COMMAND sh -c "seq 1 3000; echo 'SKIP emfile: prlimit is missing'")
add_test(NAME gpu/skip COMMAND sh -c "echo 'SKIP: no NVIDIA GPU (nvidia-smi not found)'; exit 77")
set_tests_properties(gpu/skip PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu)
add_test(NAME mp/skip COMMAND sh -c "echo 'SKIP: mpirun not installed'; exit 77")
set_tests_properties(mp/skip PROPERTIES SKIP_RETURN_CODE 77 LABELS mp)
add_test(NAME python/test_gpu_backend COMMAND sh -c "echo 'SKIP: needs a CUDA GPU (torch sees none)'; exit 77")
set_tests_properties(python/test_gpu_backend PROPERTIES SKIP_RETURN_CODE 77 LABELS python)
add_test(NAME bad COMMAND sh -c "seq 1 3000; echo 'FAIL the sum is 3, not 4'; seq 1 3000; \\
echo 'FAIL the sum is 3, not 4'; exit 1")
add_test(NAME quiet COMMAND sh -c "seq 1 3000; echo 'Assertion failed: n > 0'; exit 1")
"""

checks = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    checks["passed" if ok else "failed"] += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else "\n" + detail), flush=True)


def listed(out, test, text):
    """Whether the summary has a line for test that ends with text."""
    return any(line.split()[:1] == [test] and line.rstrip().endswith(text) for line in out.splitlines())


def summarize(build, ctest_args):
    """Runs ctest as make test does, then the summary: (ctest rc, summary rc, summary output)."""
    junit = os.path.join(build, "junit.xml")
    if os.path.exists(junit):
        os.remove(junit)
    ct = subprocess.run(["ctest", "--test-output-size-passed", "4000000", "--output-junit", junit] + ctest_args,
                        cwd=build, capture_output=True, text=True, timeout=120)
    s = subprocess.run([sys.executable, SCRIPT, junit, "--ctest-rc", str(ct.returncode), "--may-skip", "gpu"],
                       capture_output=True, text=True, timeout=60)
    return ct.returncode, s.returncode, s.stdout + s.stderr


def main():
    if not shutil.which("cmake") or not shutil.which("ctest"):
        print("FAIL: cmake and ctest must be on PATH")
        sys.exit(1)
    with tempfile.TemporaryDirectory(prefix="gb-skips-") as tmp:
        with open(os.path.join(tmp, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT)
        build = os.path.join(tmp, "build")
        cfg = subprocess.run(["cmake", "-S", tmp, "-B", build], capture_output=True, text=True, timeout=120)
        if cfg.returncode != 0:
            print("FAIL: cmake could not configure the sample project\n" + cfg.stdout + cfg.stderr)
            sys.exit(1)

        ct, rc, out = summarize(build, ["-E", "mp/skip|bad|quiet"])
        check(ct == 0 and rc == 0, "a GPU suite's skip passes (ctest %d, summary %d)" % (ct, rc), out)
        check(listed(out, "gpu/skip", "no NVIDIA GPU (nvidia-smi not found)") and "NOT ALLOWED" not in out,
              "the GPU suite's skip is listed with its reason", out)
        check(listed(out, "python/test_gpu_backend", "needs a CUDA GPU (torch sees none)"),
              "a suite named test_gpu_* may skip whatever its label", out)
        check(listed(out, "ok", "SKIP emfile: prlimit is missing"),
              "a check skipped inside a passing suite is listed (after 3000 lines of output)", out)
        check(out.rstrip().endswith("tests: 1 passed, 0 failed, 2 skipped"), "the last line counts them", out)

        ct, rc, out = summarize(build, ["-E", "bad|quiet"])
        check(ct == 0 and rc == 1, "another suite's skip fails although CTest passed (ctest %d, summary %d)"
              % (ct, rc), out)
        check(listed(out, "mp/skip", "mpirun not installed  NOT ALLOWED"), "that skip is marked with its reason", out)
        check("make test: FAILED: mp/skip skipped" in out, "the verdict names the suite", out)

        ct, rc, out = summarize(build, ["-R", "^bad$"])
        check(ct != 0 and rc == 1 and "CTest exited %d" % ct in out, "a failed test fails (ctest %d, summary %d)"
              % (ct, rc), out)
        repeats = [line for line in out.splitlines() if line.split()[:1] == ["bad"] and line.endswith("not 4")]
        check(len(repeats) == 1 and not listed(out, "bad", "3000"),
              "its FAIL line, between 6000 others and printed twice, is repeated once, and no other line of it", out)

        ct, rc, out = summarize(build, ["-R", "^quiet$"])
        check(rc == 1 and listed(out, "quiet", "Assertion failed: n > 0") and listed(out, "quiet", "3000"),
              "a failed test without FAIL lines has its last lines repeated", out)

        missing = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "none.xml")], capture_output=True,
                                 text=True, timeout=60)
        check(missing.returncode == 2 and "cannot read CTest's JUnit file" in missing.stdout,
              "a missing JUnit file fails (exit %d)" % missing.returncode, missing.stdout + missing.stderr)
    print("%d passed, %d failed" % (checks["passed"], checks["failed"]))
    sys.exit(0 if checks["failed"] == 0 else 1)


if __name__ == "__main__":
    main()
