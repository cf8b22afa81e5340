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
  - split-test with two ranks (two one-rank NCCL islands joined by the host
    bridge; both on GPU 0 when there is one): every collective, every type
    and op of reduce_scatter, and all_reduce under split-rail.
NVLink multicast is never used: NCCL_NVLS_ENABLE=0 in every run.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/gpu/test_gpu_basic.py
"""
import ctypes
import os
import re
import sys

from gpu_harness import (BUILD, base_env, check_bounds, check_rows, fail, gpu_count, load_cuda_nccl,
                         require_perf, result_rows, run_job, sizes)


def nccl_version(lib):
    v = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(v)) != 0:
        fail("ncclGetVersion failed")
    code = v.value
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100) if code >= 20900 else str(code)


def job_env(extra):
    env = base_env()
    env.update(extra)
    return env


def run_perf(name, nranks, args, extra=None, expect_sizes=None, split=False):
    cmd = [os.path.join(BUILD, "bin", "gpubridge-run"), "-n", str(nranks), "--",
           os.path.join(BUILD, "bin", "gpubridge-perf")] + args
    print("\n== %s: %s%s" % (name, " ".join("%s=%s" % kv for kv in (extra or {}).items()) + " " if extra else "",
                             " ".join(cmd)), flush=True)
    _, lines, header = run_job(name, cmd, job_env(extra or {}))
    if not re.search(r", real(, split-test)?$", header):
        fail("%s: the ranks did not run on real GPUs: %s" % (name, header))
    if split and "split-test" not in header:
        fail("%s: split-test was asked for, the header says: %s" % (name, header))
    rows = result_rows(lines)
    if not rows:
        fail("%s: no result rows" % name)
    check_rows(name, rows, expect_sizes, in_place=args[0] != "sendrecv")
    check_bounds(name, lines)
    print("ok: %s (%d rows, 0 wrong)" % (name, len(rows)), flush=True)


def main():
    ngpus = gpu_count()
    rt_name, nccl_name, nccl = load_cuda_nccl()
    print("CUDA runtime: %s; NCCL %s (%s)" % (rt_name, nccl_version(nccl), nccl_name))
    require_perf()
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
    # The other collectives, native (NCCL's own calls), every row validated.
    for coll in ("reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"):
        run_perf("%s native" % coll, n, [coll, "-b", "1K", "-e", "64M", "-f", "8", "-c", "1"])
    run_perf("reduce_scatter every type and op", n,
             ["reduce_scatter", "-b", "1K", "-e", "1K", "-d", "all", "-o", "all", "-n", "2", "-c", "1"])
    run_perf("reduce every type and op", n,
             ["reduce", "-b", "1K", "-e", "1K", "-d", "all", "-o", "all", "-n", "2", "-c", "1", "-r", str(n - 1)])
    mid = sizes(8, 16 << 20, 8)
    run_perf("all_reduce flat", n, ["all_reduce", "-b", "8", "-e", "16M", "-f", "8", "-c", "1"],
             extra={"GPUBRIDGE_POLICY": "flat"}, expect_sizes=mid)
    # Split-test islands have one rank each: two ranks, on one GPU too.
    n = 2
    run_perf("all_reduce split-test", n, ["all_reduce", "-b", "8", "-e", "16M", "-f", "8", "-c", "1"],
             extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, expect_sizes=mid, split=True)
    run_perf("broadcast split-test", n, ["broadcast", "-b", "8", "-e", "16M", "-f", "8", "-c", "1", "-r", "1"],
             extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, expect_sizes=mid, split=True)
    # Across the bridge: every other collective, and all-reduce under split-rail.
    for coll in ("reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"):
        run_perf("%s split-test" % coll, n, [coll, "-b", "1K", "-e", "16M", "-f", "8", "-c", "1"],
                 extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, split=True)
    run_perf("reduce_scatter split-test every type and op", n,
             ["reduce_scatter", "-b", "1K", "-e", "1K", "-d", "all", "-o", "all", "-n", "2", "-c", "1"],
             extra={"GPUBRIDGE_SPLIT_TEST": "alternate"}, split=True)
    run_perf("all_reduce split-rail", n, ["all_reduce", "-b", "8", "-e", "16M", "-f", "8", "-c", "1"],
             extra={"GPUBRIDGE_SPLIT_TEST": "alternate", "GPUBRIDGE_POLICY": "split-rail"}, expect_sizes=mid,
             split=True)
    print("\nPASS: gpu basic (%d GPU%s)" % (ngpus, "s" if ngpus != 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
