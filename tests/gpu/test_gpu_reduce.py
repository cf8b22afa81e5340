#!/usr/bin/env python3
"""The bridge's GPU reduction (reduceAsync, the kernels of src/device/gpu/kernels)
on a real GPU, bit for bit against gbReduceOrdered on the host: runs
tests/unit/test_reduce_async.c (build/tests/unit_test_reduce_async) with counts
1, 7 and 1000003 twice:
  - on the CUDA device (the embedded PTX, compiled by the driver);
  - on the HIP device over the emulated-AMD rig (libamdhip64.so over CUDA,
    libhiprtc.so over NVRTC: the kernels compiled from the embedded source, as
    on AMD GPUs).
Each run covers every type and op (avg too), 1 to 4 sources, with and without
ring order, sources in device memory, in registered host memory, mixed, and in
place. Checked: exit 0, the device line (cuda / nvidia; hip / amd-emulated),
an "ok" line for each of the 12 types, and "5760 cases, 0 failures"; and the
compressed wire's encoders and folds (base/wire.h) against the host's, bit
for bit: "156 cases, 0 failures".
Skips (77) without an NVIDIA GPU or the CUDA runtime; the rig's run is listed
as skipped (SKIP line) without NVRTC (GB_RIG_NVRTC_LIBRARY names one).
Run as: GB_TEST_BUILD_DIR=<build> python3 tests/gpu/test_gpu_reduce.py
"""
import os
import re
import sys

from gpu_harness import (BUILD, base_env, fail, find_nvrtc, gpu_count, load_first, rig_env, rig_libraries,
                         run_program)

COUNTS = ["1", "7", "1000003"]
CASES = 12 * 5 * 4 * 2 * 4 * len(COUNTS)  # types x ops x sources x ring x memory kinds x counts
# the compressed wire: (bf16 of f32; fp8 of f32, f16, bf16) x counts x (4 encodings into device memory, 1 into
# mapped host memory, 1..4 parts folded by sum and avg)
WIRE_CASES = 4 * len(COUNTS) * (4 + 1 + 8)
TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
         "float8e4m3", "float8e5m2")
TIMEOUT = 280  # seconds for one run


def run(name, env, device, vendor):
    program = os.path.join(BUILD, "tests", "unit_test_reduce_async")
    if not os.access(program, os.X_OK):
        fail("%s is missing: build the tests first (tests/unit/test_reduce_async.c)" % program)
    print("\n== %s: %s %s" % (name, program, " ".join(COUNTS)), flush=True)
    p = run_program(name, [program] + COUNTS, env, TIMEOUT, "the program")
    head = "device %s (vendor %s), counts %s" % (device, vendor, " ".join(COUNTS))
    if head not in p.stdout.splitlines():
        fail("%s: expected the line %r (the wrong device?)" % (name, head))
    for t in TYPES:
        if not re.search(r"^%s\s+ok$" % t, p.stdout, re.M):
            fail("%s: no '%s ok' line" % (name, t))
    closing = "reduceAsync on %s (vendor %s): %d cases, 0 failures" % (device, vendor, CASES)
    if closing not in p.stdout.splitlines():
        fail("%s: expected %r" % (name, closing))
    wire = "encodeAsync and wire folds on %s (vendor %s): %d cases, 0 failures" % (device, vendor, WIRE_CASES)
    if wire not in p.stdout.splitlines():
        fail("%s: expected %r" % (name, wire))
    print("ok: %s (%d cases and %d of the compressed wire, bit for bit)" % (name, CASES, WIRE_CASES), flush=True)


def main():
    gpu_count()
    rt_name, _ = load_first(["libcudart.so.13", "libcudart.so.12", "libcudart.so"], "CUDA runtime (libcudart)",
                            "GPUBRIDGE_CUDART_LIBRARY")
    print("CUDA runtime: %s" % rt_name)
    env = base_env()
    env["GPUBRIDGE_TIMEOUT"] = "120"
    run("cuda", dict(env, GPUBRIDGE_DEVICE_BACKEND="cuda"), "cuda", "nvidia")

    paths = rig_libraries()
    nvrtc, why = find_nvrtc()
    if nvrtc is None:
        print("SKIP emulated AMD: %s" % why)
        print("\nPASS: gpu reduce (cuda; the emulated-AMD run skipped)")
        return 0
    amd = rig_env(env, paths)
    if os.sep in nvrtc:  # NVRTC finds its builtins library by name, beside it
        amd["LD_LIBRARY_PATH"] = os.pathsep.join(
            [os.path.dirname(os.path.abspath(nvrtc))] + [d for d in [env.get("LD_LIBRARY_PATH")] if d])
    run("emulated AMD (hip over CUDA, hiprtc over NVRTC %s)" % nvrtc, amd, "hip", "amd-emulated")
    print("\nPASS: gpu reduce (cuda and emulated AMD)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
