#!/usr/bin/env python3
"""Real NVIDIA GPUs: gpubridge-perf through the cuda device and the NCCL island.

Runs on a machine with NVIDIA GPUs, the CUDA runtime (libcudart) and NCCL;
elsewhere it exits 77 (skipped) with the reason. With two or more GPUs the job
has two ranks (one GPU each), else one. Scenarios, each checked for exit 0, a
'real' run, the expected rows and 0 wrong elements out of place and in place:
  - all_reduce and broadcast, 8 B to 64 MiB (native: NCCL alone);
  - all_reduce with 2 iterations (input copies right after collectives);
  - every data type and op at 1 KiB (the 1:1 mapping onto NCCL);
  - all_reduce with GPUBRIDGE_POLICY=flat (GPU streams stage through pinned
    host memory with stream flag writes and waits);
  - with two GPUs, all_reduce in split-test (two one-GPU NCCL islands joined by
    the host bridge: island reduce, staging, bridge, island broadcast).
NVLink multicast is never used: NCCL_NVLS_ENABLE=0 in every run.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/gpu/test_gpu_basic.py
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
TAG = re.compile(r"^\[\d+\] ")


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


def nccl_version(lib):
    v = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(v)) != 0:
        fail("ncclGetVersion failed")
    code = v.value
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100) if code >= 20900 else str(code)


def sizes(lo, hi, factor):
    """The sizes gpubridge-perf sweeps: lo, lo*factor, ... while <= hi."""
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def job_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("GPUBRIDGE_") or k.startswith("OMPI_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                         "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")}
    for keep in ("GPUBRIDGE_CUDART_LIBRARY", "GPUBRIDGE_CUDA_LIBRARY", "GPUBRIDGE_NCCL_LIBRARY"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast (it can take shared GPUs down)
    env.update(extra)
    return env


def run_perf(name, nranks, args, extra=None, expect_sizes=None, split=False):
    cmd = [os.path.join(BUILD, "bin", "gpubridge-run"), "-n", str(nranks), "--",
           os.path.join(BUILD, "bin", "gpubridge-perf")] + args
    print("\n== %s: %s%s" % (name, " ".join("%s=%s" % kv for kv in (extra or {}).items()) + " " if extra else "",
                             " ".join(cmd)), flush=True)
    try:
        p = subprocess.run(cmd, env=job_env(extra or {}), capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        fail("%s: no result within %d s; output so far:\n%s" % (name, RUN_TIMEOUT, e.stdout or ""))
    out = p.stdout + p.stderr
    print(out, end="" if out.endswith("\n") else "\n", flush=True)
    if p.returncode != 0:
        fail("%s: gpubridge-run exited %d" % (name, p.returncode))
    lines = [TAG.sub("", l) for l in p.stdout.splitlines()]
    header = [l for l in lines if l.startswith("# gpubridge-perf ")]
    if len(header) != 1:
        fail("%s: expected one table header, found %d" % (name, len(header)))
    if not re.search(r", real(, split-test)?$", header[0]):
        fail("%s: the ranks did not run on real GPUs: %s" % (name, header[0]))
    if split and "split-test" not in header[0]:
        fail("%s: split-test was asked for, the header says: %s" % (name, header[0]))
    rows = [m for m in (ROW.match(l) for l in lines if not l.startswith("#")) if m]
    if not rows:
        fail("%s: no result rows" % name)
    for m in rows:
        if m.group(6) != "0" or m.group(7) != "0":
            fail("%s: %s B %s %s: #wrong out of place %s, in place %s (expected 0 and 0)"
                 % (name, m.group(1), m.group(3), m.group(4), m.group(6), m.group(7)))
        if "simulated" in m.group(8):
            fail("%s: row marked simulated: %s" % (name, m.group(0)))
    if expect_sizes is not None:
        got = [int(m.group(1)) for m in rows]
        if got != expect_sizes:
            fail("%s: sizes %s, expected %s" % (name, got, expect_sizes))
    if not any(l.startswith("# Out of bounds values : 0 OK") for l in lines):
        fail("%s: out-of-bounds check did not report 0 OK" % name)
    print("ok: %s (%d rows, 0 wrong)" % (name, len(rows)), flush=True)


def main():
    ngpus = gpu_count()
    rt_name, _ = load_first(["libcudart.so.13", "libcudart.so.12", "libcudart.so"], "CUDA runtime (libcudart)",
                            "GPUBRIDGE_CUDART_LIBRARY")
    nccl_name, nccl = load_first(["libnccl.so.2"], "NCCL (libnccl.so.2)", "GPUBRIDGE_NCCL_LIBRARY")
    print("CUDA runtime: %s; NCCL %s (%s)" % (rt_name, nccl_version(nccl), nccl_name))
    if not BUILD or not os.access(os.path.join(BUILD, "bin", "gpubridge-perf"), os.X_OK):
        fail("GB_TEST_BUILD_DIR (%r) holds no bin/gpubridge-perf: build first" % BUILD)
    n = 2 if ngpus >= 2 else 1
    print("%d GPU%s: %d rank%s" % (ngpus, "s" if ngpus != 1 else "", n, "s" if n != 1 else ""))

    big = sizes(8, 64 << 20, 4)
    run_perf("all_reduce native", n, ["all_reduce", "-b", "8", "-e", "64M", "-f", "4", "-c", "1"],
             expect_sizes=big)
    run_perf("broadcast native", n, ["broadcast", "-b", "8", "-e", "64M", "-f", "4", "-c", "1"],
             expect_sizes=big)
    # Few iterations: the in-place check's input copy follows the timed loop
    # closely, which caught gbMemcpyToDevice returning before its DMA landed.
    run_perf("all_reduce few iterations", n, ["all_reduce", "-b", "1M", "-e", "4M", "-f", "2", "-n", "2", "-c", "1"],
             expect_sizes=sizes(1 << 20, 4 << 20, 2))
    run_perf("all_reduce every type and op", n,
             ["all_reduce", "-b", "1K", "-e", "1K", "-d", "all", "-o", "all", "-n", "2", "-c", "1"])
    run_perf("broadcast every type", n,
             ["broadcast", "-b", "1K", "-e", "1K", "-d", "all", "-n", "2", "-c", "1", "-r", str(n - 1)])
    mid = sizes(8, 16 << 20, 8)
    run_perf("all_reduce flat", n, ["all_reduce", "-b", "8", "-e", "16M", "-f", "8", "-c", "1"],
             extra={"GPUBRIDGE_POLICY": "flat"}, expect_sizes=mid)
    if n >= 2:
        run_perf("all_reduce split-test", n, ["all_reduce", "-b", "8", "-e", "16M", "-f", "8", "-c", "1"],
                 extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, expect_sizes=mid, split=True)
        run_perf("broadcast split-test", n, ["broadcast", "-b", "8", "-e", "16M", "-f", "8", "-c", "1", "-r", "1"],
                 extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, expect_sizes=mid, split=True)
    print("\nPASS: gpu basic (%d rank%s)" % (n, "s" if n != 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
