#!/usr/bin/env python3
"""Start-up rules that need real GPUs, on 2 GPUs: two ranks of one island on
one GPU, and a LOCAL_RANK naming a GPU the process cannot see. Every rank must
fail with byte-identical text that names the fault. Split-test mode may share
GPUs. Skips (77) without 2 NVIDIA GPUs."""
import os
import re
import shutil
import subprocess
import sys

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "build")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


if not shutil.which("nvidia-smi"):
    skip("no NVIDIA GPU (nvidia-smi not found)")
if subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ") < 2:
    skip("needs 2 GPUs")

env = dict(os.environ, NCCL_NVLS_ENABLE="0", GPUBRIDGE_TIMEOUT="30")
env.pop("GPUBRIDGE_VENDOR", None)
env.pop("CUDA_VISIBLE_DEVICES", None)
failed = 0


def job(name, n, args, extra, expect_ok=False, must=()):
    global failed
    run = subprocess.run([os.path.join(BUILD, "bin", "gpubridge-run"), "-n", str(n), "--keep-going", "--timeout",
                          "90", "--", os.path.join(BUILD, "tests", "rank_init")] + args,
                         env=dict(env, **extra), capture_output=True, text=True, timeout=120)
    errors = {}
    for line in run.stdout.splitlines():
        m = re.match(r"\[(\d+)\] init-error: (.*)", line)
        if m:
            errors[int(m.group(1))] = m.group(2)
    oks = len(re.findall(r"init-ok rank", run.stdout))
    if expect_ok:
        ok = run.returncode == 0 and oks == n
        detail = f"{oks} of {n} ranks initialized"
    else:
        texts = set(errors.values())
        ok = len(errors) == n and len(texts) == 1 and all(s in next(iter(texts)) for s in must)
        detail = next(iter(texts)) if len(texts) == 1 else f"{len(errors)} errors, {len(texts)} distinct: {errors}"
    print(("PASS " if ok else "FAIL ") + f"{name}: {detail}")
    if not ok:
        print(run.stdout[-2000:], run.stderr[-2000:])
        failed += 1


job("two ranks of one island on GPU 0", 2, [], {"GPUBRIDGE_DEVICE": "0"},
    must=("ranks 0 and 1 of island nvidia share GPU",))
job("LOCAL_RANK 5 with 2 GPUs visible", 2, ["--env-for-rank", "1", "LOCAL_RANK=5"], {},
    must=("rank 1", "LOCAL_RANK=5", "sees 2 GPUs"))
job("split-test may share a GPU", 2, [], {"GPUBRIDGE_DEVICE": "0", "GPUBRIDGE_SPLIT_TEST": "alternate"},
    expect_ok=True)
job("one GPU per rank", 2, [], {}, expect_ok=True)
sys.exit(1 if failed else 0)
