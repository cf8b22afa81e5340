"""Helpers of the packaging suites (tests/install/test_*.py): the source and
build folders, the project's version, commands with deadlines, a temporary
folder removed at the end. Exit codes: 0 pass, 1 fail."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("GB_TEST_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD_DIR = os.environ.get("GB_TEST_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
CMAKE = os.environ.get("GB_TEST_CMAKE") or "cmake"
CC = os.environ.get("GB_TEST_CC") or "cc"
sys.path.insert(0, os.path.dirname(HERE))
from ports import free_port  # noqa: E402,F401 (tests/ports.py)

# Variables a job or a build must not inherit from whoever runs the suite.
_INHERITED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
              "LD_LIBRARY_PATH", "LD_PRELOAD", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "PYTHONPATH")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def version():
    """The project's version, read from the file VERSION (not from the build)."""
    with open(os.path.join(SOURCE_DIR, "VERSION"), encoding="utf-8") as f:
        return f.read().strip()


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBRIDGE_") and k not in _INHERITED}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, what, timeout, env=None, cwd=None):
    """Runs cmd; fails the suite, with its output, when it fails or passes the deadline."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or clean_env(), cwd=cwd)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        fail("%s: no end within %d s: %s\n%s" % (what, timeout, " ".join(cmd), out[-3000:]))
    if p.returncode != 0:
        fail("%s: exit %d: %s\n%s%s" % (what, p.returncode, " ".join(cmd), p.stdout[-4000:], p.stderr[-4000:]))
    return p.stdout


def cmake_cache(name):
    """A value of the build's CMakeCache.txt (CMAKE_INSTALL_LIBDIR, ...), or None."""
    with open(os.path.join(BUILD_DIR, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return None


class TempDir:
    """A temporary folder, removed on exit whatever happened."""

    def __init__(self, prefix):
        self.prefix = prefix

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix=self.prefix)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False
