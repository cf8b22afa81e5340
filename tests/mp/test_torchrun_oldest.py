#!/usr/bin/env python3
"""torchrun's store with the oldest torch gpubridge supports (2.8): runs
test_torchrun.py (C ranks under a real torchrun meeting through its agent's
store, the store's answer to gpubridge's ping naming torch 2.8 at INFO) and
test_store_protocol.py (fake stores refused, the message naming torch 2.8)
with the Python of a virtual environment that holds the torch that
tests/requirements-torch-oldest.txt lists. tests/test_torchrun.py itself
runs with the newest (tests/requirements.txt, 2.13).

The environment is made once, outside the checkout, by tests/tools/venv.sh
(PyPI's torch 2.8.0 with CUDA's libraries: about 6.5 GB, 1.5 minutes here),
at $GB_TORCH_OLDEST_VENV or else ${XDG_CACHE_HOME:-~/.cache}/gpubridge/
venv-torch-oldest; a lock file beside it keeps two runs from making it at
once. `rm -rf` of that folder removes it.

    python3 tests/mp/test_torchrun_oldest.py
"""
import fcntl
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

OLDEST = "2.8"
REQUIREMENTS = os.path.join(harness.SOURCE_DIR, "tests", "requirements-torch-oldest.txt")
VENV_SH = os.path.join(harness.SOURCE_DIR, "tests", "tools", "venv.sh")
INSTALL_S = 900
SUITE_S = 300


def venv_path():
    given = os.environ.get("GB_TORCH_OLDEST_VENV")
    if given:
        return given
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "gpubridge", "venv-torch-oldest")


def ensure_venv(suite, venv):
    """Makes venv (once; again after an edit of REQUIREMENTS); True when it is ready."""
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    t0 = time.monotonic()
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits for the first one's install
        try:
            p = subprocess.run(["sh", VENV_SH, venv, sys.executable, REQUIREMENTS, "--no-cache-dir"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=INSTALL_S)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = -1, "%s\n(stopped after %d s)" % (e.stdout or "", INSTALL_S)
    if out.strip():
        print(out.strip()[-3000:], flush=True)
    print("%s: ready after %.1f s" % (venv, time.monotonic() - t0), flush=True)
    return suite.check(rc == 0, "the environment with torch %s is made (%s)" % (OLDEST, venv), out[-3000:])


def run_suite(suite, python, name):
    t0 = time.monotonic()
    try:
        p = subprocess.run([python, os.path.join(harness.HERE, name)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=harness.scaled(SUITE_S))
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = -1, "%s\n(stopped after %d s)" % (e.stdout or "", harness.scaled(SUITE_S))
    print("\n".join(l for l in out.splitlines() if l.startswith(("PASS", "FAIL", "torch ")) or " passed, " in l),
          flush=True)
    last = [l for l in out.splitlines() if " passed, " in l]
    suite.check(rc == 0 and last and last[-1].endswith(" 0 failed"),
                "%s with torch %s: every check passes (%s, %.1f s)" % (name, OLDEST, last[-1] if last else "no count",
                                                                        time.monotonic() - t0), out[-4000:])


def main():
    harness.require_built("rank_torchrun", "rank_init")
    suite = harness.Suite("torchrun_oldest")
    venv = venv_path()
    if ensure_venv(suite, venv):
        python = os.path.join(venv, "bin", "python")
        p = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=120)
        version = p.stdout.strip()
        if suite.check(version.startswith(OLDEST + "."), "its torch is %s (%s)" % (OLDEST, version or "none")):
            for name in ("test_torchrun.py", "test_store_protocol.py"):
                run_suite(suite, python, name)
    suite.done()


if __name__ == "__main__":
    main()
