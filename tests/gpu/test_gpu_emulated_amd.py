#!/usr/bin/env python3
"""Two vendors on NVIDIA GPUs: ranks 0-1 are NVIDIA ranks (device/cuda, island/nccl),
ranks 2-3 are emulated AMD ranks (device/hip, island/rccl) whose HIP and RCCL calls
the test rig (tests/gpu/emulated_amd: libamdhip64.so over CUDA, librccl.so.1 over
NCCL) serves on the same GPUs. Ranks 0 and 2 use GPU 0, ranks 1 and 3 GPU 1, so
each island has two GPUs and the islands meet over the host bridge (hierarchical).
With one GPU: rank 0 NVIDIA and rank 1 emulated AMD, both on GPU 0 (islands of one
rank each; NCCL would refuse two ranks of one island on one GPU).

gpubridge-run's --vendors cannot be used (it sets GPUBRIDGE_VENDOR, which means
simulated): a small sh wrapper gives each rank its environment by $RANK.

Checked for all_reduce and broadcast, 8 B to 64 MiB: exit 0; one table header
naming the islands nvidia (ranks 0-1) and amd-emulated (ranks 2-3) on real GPUs;
every row with 0 wrong elements out of place and in place; the out-of-bounds
check OK; every log line of ranks 2-3 that carries a run mode says "emulated AMD"
(lines logged before the device is chosen carry none), and ranks 0-1 say "job
with emulated AMD" once the topology is known.
NVLink multicast is never used: NCCL_NVLS_ENABLE=0 in every run.

Skips (77) without an NVIDIA GPU, or without the CUDA runtime or NCCL. Run as: GB_TEST_BUILD_DIR=<build> python3 tests/gpu/test_gpu_emulated_amd.py
"""
import os
import re
import sys

from gpu_harness import (BUILD, RUN_TIMEOUT, TAG, base_env, check_bounds, check_rows, fail, gpu_count,
                         load_cuda_nccl, require_perf, result_rows, run_job, sizes, skip)

# The layout, by GPU count (main): ranks, the emulated AMD ones, the header's islands.
NRANKS = 4
AMD_RANKS = (2, 3)
ISLANDS = "(nvidia: ranks 0-1, amd-emulated: ranks 2-3)"
# host:pid:tid [rank] gpubridge[ MODE] LEVEL SUBSYS message (base/log.c)
LOG = re.compile(r"^\S+:\d+:\d+ \[[-\d]+\] gpubridge(?: (.*?))? (WARN|INFO|TRACE) [A-Z]+ ")

# Each rank's environment by $RANK: ranks 2-3 open the hip device on the rig,
# ranks 0-1 the cuda device; LOCAL_RANK picks GPU RANK % 2 on both sides
# (GPU 0 for both ranks of the one-GPU layout, whose AMD rank is 1).
WRAPPER = r'''
case "$RANK" in
  $GB_AMD_RANKS) export GPUBRIDGE_DEVICE_BACKEND=hip GPUBRIDGE_HIP_LIBRARY="$GB_RIG_HIP" GPUBRIDGE_RCCL_LIBRARY="$GB_RIG_RCCL" ;;
  *) export GPUBRIDGE_DEVICE_BACKEND=cuda ;;
esac
unset GB_RIG_HIP GB_RIG_RCCL GB_AMD_RANKS
export LOCAL_RANK=$((RANK % 2))
exec "$@"
'''


def job_env(rig_hip, rig_rccl):
    # The rig reads the kept library paths too: it serves HIP with the same CUDA
    # and RCCL with the same NCCL.
    env = base_env(drop=("CUDA_VISIBLE_DEVICES",))
    env["GPUBRIDGE_TIMEOUT"] = "120"
    env["GPUBRIDGE_DEBUG"] = "INFO"
    env["GPUBRIDGE_DEBUG_SUBSYS"] = "INIT,DEVICE"
    env["GB_RIG_HIP"] = rig_hip
    env["GB_RIG_RCCL"] = rig_rccl
    env["GB_AMD_RANKS"] = "|".join(str(r) for r in AMD_RANKS)
    return env


def check_labels(name, stderr):
    """Ranks 2-3: no mode but "emulated AMD" (or none, before the device is
    chosen), and at least one line with it. Ranks 0-1: at least one line with
    "job with emulated AMD", and none claims AMD without "emulated"."""
    seen = {r: 0 for r in range(NRANKS)}
    for line in stderr.splitlines():
        t = TAG.match(line)
        if not t:
            continue
        rank, text = int(t.group(1)), t.group(2)
        m = LOG.match(text)
        if not m:
            continue
        mode = m.group(1) or ""
        if rank in AMD_RANKS:
            if mode and "emulated AMD" not in mode:
                fail("%s: rank %d logged a line whose mode is %r, not emulated AMD: %s" % (name, rank, mode, line))
            seen[rank] += "emulated AMD" in mode
        else:
            if "amd" in mode.lower() and "emulated" not in mode:
                fail("%s: rank %d logged a line claiming real AMD: %s" % (name, rank, line))
            seen[rank] += "job with emulated AMD" in mode
    for r in range(NRANKS):
        if not seen[r]:
            fail("%s: rank %d logged no line saying %s" % (name, r, "emulated AMD" if r in AMD_RANKS
                                                              else "job with emulated AMD"))


def run_perf(name, args, env, expect_sizes):
    cmd = [os.path.join(BUILD, "bin", "gpubridge-run"), "-n", str(NRANKS), "--timeout", str(RUN_TIMEOUT - 20),
           "--", "sh", "-c", WRAPPER, "sh", os.path.join(BUILD, "bin", "gpubridge-perf")] + args
    print("\n== %s: gpubridge-run -n %d -- sh -c <per-rank env> gpubridge-perf %s" % (name, NRANKS, " ".join(args)),
          flush=True)
    p, lines, header = run_job(name, cmd, env)
    if ISLANDS not in header:
        fail("%s: the islands are not %s: %s" % (name, ISLANDS, header))
    if not re.search(r"policy (hierarchical|split-rail|flat), real$", header):
        fail("%s: expected a bridged job on real GPUs: %s" % (name, header))
    devices = [l for l in lines if l.startswith("#  Rank ")]
    for r in range(NRANKS):
        want = "device amd-emulated (real)" if r in AMD_RANKS else "device nvidia (real)"
        if not any(l.startswith("#  Rank %2d " % r) and want in l for l in devices):
            fail("%s: rank %d is not listed with '%s': %s" % (name, r, want, devices))
    rows = result_rows(lines)
    check_rows(name, rows, expect_sizes, in_place=args[0] != "sendrecv")
    check_bounds(name, lines)
    check_labels(name, p.stderr)
    print("ok: %s (%d rows, 0 wrong)" % (name, len(rows)), flush=True)


def main():
    global NRANKS, AMD_RANKS, ISLANDS
    ngpus = gpu_count()
    if ngpus < 2:
        NRANKS, AMD_RANKS, ISLANDS = 2, (1,), "(nvidia: rank 0, amd-emulated: rank 1)"
        print("one GPU: rank 0 NVIDIA and rank 1 emulated AMD, both on GPU 0")
    who = "nvidia 0-1 + emulated AMD 2-3" if NRANKS == 4 else "nvidia 0 + emulated AMD 1"
    rt_name, nccl_name, _ = load_cuda_nccl()
    print("CUDA runtime: %s; NCCL: %s" % (rt_name, nccl_name))
    require_perf()
    rig = os.path.join(BUILD, "tests", "emulated_amd")
    rig_hip = os.path.join(rig, "libamdhip64.so")
    rig_rccl = os.path.join(rig, "librccl.so.1")
    for f in (rig_hip, rig_rccl):
        if not os.path.isfile(f):
            fail("%s is missing: the emulated-AMD rig is built by tests/gpu/emulated_amd/CMakeLists.txt "
                 "(add_subdirectory(gpu/emulated_amd) in tests/CMakeLists.txt)" % f)
    env = job_env(os.path.abspath(rig_hip), os.path.abspath(rig_rccl))

    big = sizes(8, 64 << 20, 4)
    run_perf("all_reduce, " + who, ["all_reduce", "-b", "8", "-e", "64M", "-f", "4", "-c", "1"],
             env, big)
    run_perf("broadcast, " + who, ["broadcast", "-b", "8", "-e", "64M", "-f", "4", "-c", "1"],
             env, big)
    mid = sizes(1024, 16 << 20, 8)
    for coll in ("reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"):
        run_perf("%s, %s" % (coll, who), [coll, "-b", "1K", "-e", "16M", "-f", "8", "-c", "1"],
                 env, mid)
    split_rail = dict(env, GPUBRIDGE_POLICY="split-rail")
    run_perf("all_reduce split-rail, " + who,
             ["all_reduce", "-b", "8", "-e", "64M", "-f", "4", "-c", "1"], split_rail, big)
    print("\nPASS: gpu emulated AMD (%s on %d GPU%s)" % (who, min(ngpus, 2), "s" if ngpus > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
