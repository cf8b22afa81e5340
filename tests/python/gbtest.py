"""Helpers of the Python suites (tests/python/test_*.py).

A suite runs itself once per rank as a subprocess (`script --rank-worker
OUTDIR`), 4 ranks by default: nvidia, nvidia, amd, amd (simulated). Every
process wait has a deadline; a rank that fails stops the others.
Exit codes: 0 pass, 1 fail, 77 skip (with a reason on stdout).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from ports import free_port  # noqa: E402 (tests/ports.py, shared with the other suites)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("GB_TEST_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
PACKAGE_DIR = os.path.join(SOURCE_DIR, "python")
VENDORS = ("nvidia", "nvidia", "amd", "amd")

# Variables a job must not inherit from whoever runs the suite.
_JOB_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
             "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "TORCHELASTIC_RUN_ID")


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def setup_path():
    """Uses the package of this checkout and, under CTest, the library it built."""
    if PACKAGE_DIR not in sys.path:
        sys.path.insert(0, PACKAGE_DIR)
    build = os.environ.get("GB_TEST_BUILD_DIR")
    if not os.environ.get("GPUBRIDGE_LIBRARY") and build:
        os.environ["GPUBRIDGE_LIBRARY"] = os.path.join(build, "lib", "libgpubridge.so")


def require_torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        skip("torch is not installed")
    if not dist.is_available():
        skip("this torch has no torch.distributed")
    return torch


def require_library(*symbols):
    """Fails when libgpubridge cannot be loaded; skips when it lacks a C function a suite needs."""
    setup_path()
    import gpubridge
    try:
        gpubridge.library_path()
    except gpubridge.Error as e:
        fail(str(e))
    missing = [s for s in symbols if not gpubridge.has(s)]
    if missing:
        skip("%s lacks %s (rebuild the library)" % (gpubridge.library_path(), ", ".join(missing)))
    return gpubridge


def worker_env(rank, world, vendor, port, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBRIDGE_") and k not in _JOB_VARS}
    if os.environ.get("GPUBRIDGE_LIBRARY"):
        env["GPUBRIDGE_LIBRARY"] = os.environ["GPUBRIDGE_LIBRARY"]
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GPUBRIDGE_SOCKET_IFNAME="lo", GPUBRIDGE_TIMEOUT="60", OMP_NUM_THREADS="1",
               PYTHONPATH=PACKAGE_DIR + os.pathsep + env.get("PYTHONPATH", ""))
    if vendor:  # a simulated GPU of this vendor; None: the rank's real GPU
        env["GPUBRIDGE_VENDOR"] = vendor
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_ranks(script, vendors=VENDORS, timeout=180, args=(), extra_env=None, prefix=()):
    """Runs script --rank-worker OUTDIR ARGS... on len(vendors) ranks, each
    command after prefix (e.g. tests/mp/hosts.py's wrapper, which puts the
    rank on its emulated host).
    Returns (outdir, [(rc, output)]); fails the suite on a timeout or a nonzero rank."""
    out = tempfile.mkdtemp(prefix="gbpy-")
    port = free_port()
    world = len(vendors)
    procs, logs = [], []
    for r, v in enumerate(vendors):
        log = open(os.path.join(out, "rank%d.log" % r), "w+")
        logs.append(log)
        procs.append(subprocess.Popen(list(prefix) + [sys.executable, script, "--rank-worker", out] + list(args),
                                      env=worker_env(r, world, v, port, extra_env),
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    deadline = time.monotonic() + timeout
    failed = None
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            failed = "timed out after %d s" % timeout
            break
        bad = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
        if bad:
            failed = "rank %d exited with %d" % (bad[0], procs[bad[0]].returncode)
            break
        try:
            procs[[p.poll() is None for p in procs].index(True)].wait(0.2)
        except subprocess.TimeoutExpired:
            pass
    if failed:
        # Give peers of a failed rank a moment to report their own view, then stop them.
        end = time.monotonic() + 5
        for p in procs:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
    results = []
    for p, log in zip(procs, logs):
        log.seek(0)
        results.append((p.returncode, log.read()))
        log.close()
    bad = [r for r, (rc, _) in enumerate(results) if rc != 0]
    if failed or bad:
        for r, (rc, text) in enumerate(results):
            print("---- rank %d (%s) rc=%s ----" % (r, vendors[r] or "real GPU", rc))
            print("\n".join(text.splitlines()[-40:]))
        fail("%s: %s" % (os.path.basename(script), failed or "ranks %s failed" % bad))
    return out, results


def cleanup(outdir):
    shutil.rmtree(outdir, ignore_errors=True)


def is_worker():
    return len(sys.argv) >= 3 and sys.argv[1] == "--rank-worker"


def worker_outdir():
    return sys.argv[2]


def check(cond, msg):
    """An assertion of a rank: raises so the rank exits nonzero with msg."""
    if not cond:
        raise AssertionError(msg)
