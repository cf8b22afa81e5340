#!/usr/bin/env python3
"""Stream ordering on real GPUs: tests/gpu/ordering_stress.cu (kernel writes,
gbAllReduce, kernel checks, same stream, no host sync) in one NCCL island of 2
GPUs (native) and in split-test (two 1-GPU islands over the host bridge), the
latter with each way of signalling the bridge (GPUBRIDGE_STREAM_FLAGS).
Skips (77) without an NVIDIA GPU or nvcc."""
import os
import shutil
import subprocess
import sys

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "build")
SOURCE = os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


if not shutil.which("nvidia-smi"):
    skip("no NVIDIA GPU (nvidia-smi not found)")
gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
if gpus < 2:
    skip(f"needs 2 GPUs, found {gpus}")
nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if not nvcc:
    skip("nvcc not found")

exe = os.path.join(BUILD, "tests", "ordering_stress")
lib = os.path.join(BUILD, "lib")
subprocess.run([nvcc, "-O2", "-cudart", "shared", "-I", os.path.join(SOURCE, "include"), "-I", os.path.join(BUILD, "include"),
                os.path.join(SOURCE, "tests", "gpu", "ordering_stress.cu"), "-L", lib, "-lgpubridge",
                "-Xlinker", "-rpath=" + os.path.abspath(lib), "-o", exe], check=True, timeout=300)

env = dict(os.environ, NCCL_NVLS_ENABLE="0", GPUBRIDGE_TIMEOUT="60")
env.pop("GPUBRIDGE_VENDOR", None)
failed = 0
for name, extra in (("native, one NCCL island of 2 GPUs", {}),
                    ("split-test, two 1-GPU islands over the bridge", {"GPUBRIDGE_SPLIT_TEST": "half"}),
                    ("split-test, flags by 32-bit stream memory operations",
                     {"GPUBRIDGE_SPLIT_TEST": "half", "GPUBRIDGE_STREAM_FLAGS": "32"}),
                    ("split-test, flags by host functions (the fallback)",
                     {"GPUBRIDGE_SPLIT_TEST": "half", "GPUBRIDGE_STREAM_FLAGS": "host"})):
    run = subprocess.run([os.path.join(BUILD, "bin", "gpubridge-run"), "-n", "2", "--timeout", "240", "--", exe,
                          "300"], env=dict(env, **extra), capture_output=True, text=True, timeout=300)
    lines = [l for l in run.stdout.splitlines() if "wrong elements" in l]
    ok = run.returncode == 0 and len(lines) == 2 and all(" 0 wrong elements" in l for l in lines)
    print(("PASS " if ok else "FAIL ") + name + ": " + " | ".join(lines))
    if not ok:
        print(run.stdout[-3000:], run.stderr[-3000:])
        failed += 1
sys.exit(1 if failed else 0)
