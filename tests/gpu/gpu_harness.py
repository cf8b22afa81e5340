"""Shared pieces of the real-GPU tests (tests/gpu/test_gpu_*.py): skip and fail
with the ctest codes, finding the GPUs and libraries, the job environment, and
running gpubridge-perf and checking its result rows. Not a test itself.
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "")
RUN_TIMEOUT = 300  # seconds for one perf job
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)"
                 r"\s+\S+\s+\S+\s+\S+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)(.*)$")
TAG = re.compile(r"^\[(\d+)\] (.*)$")
# Variables a job must not inherit: they would place or misname its ranks.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def gpu_count():
    """GPUs nvidia-smi lists; skips when there is no tool or no GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        skip("no NVIDIA GPU (nvidia-smi not found)")
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        skip("no NVIDIA GPU (nvidia-smi -L did not answer within 60 s)")
    gpus = [l for l in out.stdout.splitlines() if l.startswith("GPU ")]
    if out.returncode != 0 or not gpus:
        skip("no NVIDIA GPU (no device: nvidia-smi -L exited %d: %s)"
             % (out.returncode, (out.stdout + out.stderr).strip()[:200]))
    q = subprocess.run([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    print("nvidia-smi:\n  " + "\n  ".join(q.stdout.strip().splitlines()))
    return len(gpus)


def load_first(names, what, variable):
    """The first of names that loads with ctypes; skips when none does."""
    given = os.environ.get(variable, "")
    tried = [given] if given else names
    errors = []
    for name in tried:
        try:
            return name, ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    skip("no %s found (tried %s; set %s): %s" % (what, ", ".join(tried), variable, errors[-1]))


def load_cuda_nccl():
    """(runtime name, NCCL name, NCCL library); skips when either is missing."""
    rt_name, _ = load_first(["libcudart.so.13", "libcudart.so.12", "libcudart.so"], "CUDA runtime (libcudart)",
                            "GPUBRIDGE_CUDART_LIBRARY")
    nccl_name, nccl = load_first(["libnccl.so.2"], "NCCL (libnccl.so.2)", "GPUBRIDGE_NCCL_LIBRARY")
    return rt_name, nccl_name, nccl


# The emulated-AMD rig (tests/gpu/emulated_amd, built with the tests): each
# library and the variable that points a rank at it.
RIG_LIBRARIES = {"hip": ("libamdhip64.so", "GPUBRIDGE_HIP_LIBRARY"),
                 "rccl": ("librccl.so.1", "GPUBRIDGE_RCCL_LIBRARY"),
                 "hiprtc": ("libhiprtc.so", "GPUBRIDGE_HIPRTC_LIBRARY")}


def rig_libraries():
    """{'hip': path, 'rccl': path, 'hiprtc': path}: the rig's libraries in this
    build (absolute paths); fails when one is missing."""
    rig = os.path.join(BUILD, "tests", "emulated_amd")
    paths = {}
    for key, (name, _) in RIG_LIBRARIES.items():
        path = os.path.abspath(os.path.join(rig, name))
        if not os.path.isfile(path):
            fail("%s is missing: the emulated-AMD rig is built by tests/gpu/emulated_amd/CMakeLists.txt "
                 "(add_subdirectory(gpu/emulated_amd) in tests/CMakeLists.txt)" % path)
        paths[key] = path
    return paths


def rig_env(env, paths):
    """env for a rank on the rig: the hip device, HIP, RCCL and hiprtc from paths (rig_libraries())."""
    env = dict(env, GPUBRIDGE_DEVICE_BACKEND="hip")
    for key, (_, variable) in RIG_LIBRARIES.items():
        env[variable] = paths[key]
    return env


def find_nvrtc():
    """(path or name of the NVRTC the rig's libhiprtc.so will load, or None; why
    not). GB_RIG_NVRTC_LIBRARY is the rig's variable for it."""
    given = os.environ.get("GB_RIG_NVRTC_LIBRARY", "")
    names = [given] if given else ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    errors = []
    for name in names:
        try:
            ctypes.CDLL(name)
            return name, ""
        except OSError as e:
            errors.append(str(e))
    return None, "no NVRTC (tried %s; set GB_RIG_NVRTC_LIBRARY): %s" % (", ".join(names), errors[-1])


def require_perf():
    if not BUILD or not os.access(os.path.join(BUILD, "bin", "gpubridge-perf"), os.X_OK):
        fail("GB_TEST_BUILD_DIR (%r) holds no bin/gpubridge-perf: build first" % BUILD)


def sizes(lo, hi, factor):
    """The sizes gpubridge-perf sweeps: lo, lo*factor, ... while <= hi."""
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def base_env(drop=()):
    """This environment without gpubridge, MPI and launcher variables (and
    those in drop), keeping the library paths; never NVLink multicast."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("GPUBRIDGE_") or k.startswith("OMPI_"))
           and k not in LAUNCHER_VARS + tuple(drop)}
    for keep in ("GPUBRIDGE_CUDART_LIBRARY", "GPUBRIDGE_CUDA_LIBRARY", "GPUBRIDGE_NCCL_LIBRARY"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast (it can take shared GPUs down)
    return env


def run_program(name, cmd, env, timeout, what):
    """Runs cmd, prints its output, fails unless it exits 0 within timeout
    (what: how a non-zero exit is named). Returns the process."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        fail("%s: no result within %d s; output so far:\n%s" % (name, timeout, e.stdout or ""))
    out = p.stdout + p.stderr
    print(out, end="" if out.endswith("\n") else "\n", flush=True)
    if p.returncode != 0:
        fail("%s: %s exited %d" % (name, what, p.returncode))
    return p


def run_job(name, cmd, env):
    """Runs one gpubridge-run job, prints its output, fails unless it exits 0.
    Returns the process and its stdout lines without the [rank] tags."""
    p = run_program(name, cmd, env, RUN_TIMEOUT, "gpubridge-run")
    lines = [TAG.sub(r"\2", l) for l in p.stdout.splitlines()]
    header = [l for l in lines if l.startswith("# gpubridge-perf ")]
    if len(header) != 1:
        fail("%s: expected one table header, found %d" % (name, len(header)))
    # Every rank here runs on a GPU whose runtime has events (the emulated-AMD
    # rig's hipEvent* included), so the times must be the device's.
    timing = [l for l in lines if l.startswith("# timing: ")]
    if "-E" not in cmd and (len(timing) != 1 or not timing[0].startswith("# timing: device events")):
        fail("%s: expected '# timing: device events ...' in the header, found %r" % (name, timing))
    return p, lines, header[0]


def result_rows(lines):
    return [m for m in (ROW.match(l) for l in lines if not l.startswith("#")) if m]


def check_rows(name, rows, expect_sizes, in_place=True):
    """Every row 0 wrong out of place and in place (N/A in place for a
    collective without one: in_place False), none simulated, and the sizes
    expect_sizes (unless None)."""
    for m in rows:
        if m.group(6) != "0" or m.group(7) != ("0" if in_place else "N/A"):
            fail("%s: %s B %s %s: #wrong out of place %s, in place %s (expected 0 and %s)"
                 % (name, m.group(1), m.group(3), m.group(4), m.group(6), m.group(7), "0" if in_place else "N/A"))
        if "simulated" in m.group(8):
            fail("%s: row marked simulated: %s" % (name, m.group(0)))
    if expect_sizes is not None:
        got = [int(m.group(1)) for m in rows]
        if got != expect_sizes:
            fail("%s: sizes %s, expected %s" % (name, got, expect_sizes))


def check_bounds(name, lines):
    if not any(l.startswith("# Out of bounds values : 0 OK") for l in lines):
        fail("%s: out-of-bounds check did not report 0 OK" % name)
