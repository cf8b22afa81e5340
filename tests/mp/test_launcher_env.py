#!/usr/bin/env python3
"""gbCommInitFromEnv under launchers' own variables, without gpubridge-run:
torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, no job
secret) and Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). Each rank runs
gpubridge-perf, which validates every result and exits nonzero on any error."""
import os
import subprocess
import sys
import time

from harness import free_port

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "build")
PERF = os.path.join(BUILD, "bin", "gpubridge-perf")
VENDORS = ["nvidia", "nvidia", "amd"]


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUBRIDGE_", "OMPI_", "PMIX_", "SLURM_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env["GPUBRIDGE_TIMEOUT"] = "20"
    return env


def run_job(name, rank_vars):
    port = free_port()
    procs = []
    for r, vendor in enumerate(VENDORS):
        env = clean_env()
        env.update(rank_vars(r, len(VENDORS)))
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GPUBRIDGE_VENDOR": vendor})
        procs.append(subprocess.Popen([PERF, "all_reduce", "-b", "8", "-e", "256K", "-f", "8", "-n", "2"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + 60
    outputs, ok = [], True
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            print(f"FAIL {name}: rank {r} still running at the deadline")
            ok = False
        outputs.append(out)
        if p.returncode != 0:
            print(f"FAIL {name}: rank {r} exited {p.returncode}\n{out}")
            ok = False
    table = outputs[0]
    rows = [l for l in table.splitlines() if l.strip() and not l.startswith("#")]
    wrong = [l for l in rows if l.split()[8] != "0" or l.split()[12] != "0"]
    if ok and (len(rows) < 3 or wrong or "3 ranks, 2 islands" not in table):
        print(f"FAIL {name}: unexpected table\n{table}")
        ok = False
    print(("PASS " if ok else "FAIL ") + f"{name}: {len(rows)} sizes validated on 3 ranks")
    return ok


def torchrun(r, n):
    return {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n),
            "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "test"}


def slurm(r, n):
    return {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(n), "SLURM_LOCALID": str(r), "SLURM_JOB_ID": "4242",
            "SLURM_STEP_ID": "0", "SLURM_NNODES": "1"}


results = [run_job("torchrun variables", torchrun), run_job("Slurm variables", slurm)]
sys.exit(0 if all(results) else 1)
