#!/usr/bin/env python3
"""gbCommInitFromEnv under launchers' own variables, without gpubridge-run:
torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, no job
secret; its agent store is tests/mp/test_torchrun.py's), Slurm's
(SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and Open MPI's
(OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK). Each rank runs gpubridge-perf,
which validates every result and exits nonzero on any error.

- Slurm's variables without MASTER_ADDR: the rendezvous on the first node
  of SLURM_STEP_NODELIST, said at INFO by every rank;
- islands from GPUBRIDGE_VENDOR per rank (torchrun variables), and from one
  GPUBRIDGE_VENDORS=nvidia:2,amd:1 given to every rank alike under each
  launcher's variables and under gpubridge-run: the same job, 3 ranks in 2
  islands, everywhere;
- a WORLD_SIZE mismatch (one rank told 2 of 4; rank 0 told 2): every rank's
  init fails with the same text naming the mismatch and both sizes, well
  within GPUBRIDGE_TIMEOUT;
- a label that is no known vendor (nvida): rank 0 warns once, naming it and
  the islands;
- GPUBRIDGE_DEBUG=INFO: each process logs the version banner once, and the
  "ready" line names the policy (hierarchical, not a number); each rank's
  line names who set its variables: gpubridge-run, torchrun, or neither
  ("the variables RANK and WORLD_SIZE");
- a job with no GPU and no vendor label: rank 0 alone says at INFO that it
  runs on the CPU as one island "cpu", and how to simulate vendors.
"""
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import free_port  # noqa: E402

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "build")
PERF = os.path.join(BUILD, "bin", "gpubridge-perf")
VENDORS = ["nvidia", "nvidia", "amd"]
SOURCE = os.environ.get("GB_TEST_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUBRIDGE_", "OMPI_", "PMIX_", "SLURM_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_",
                                "TORCHELASTIC_"))}
    env["GPUBRIDGE_TIMEOUT"] = "20"
    return env


def start(prog, n, rank_vars, per_rank=None, extra=None, unset=()):
    """Starts n processes of prog; per_rank(r) adds variables to rank r; unset names variables to leave out."""
    port = free_port()
    procs = []
    for r in range(n):
        env = clean_env()
        env.update(rank_vars(r, n))
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        env.update(extra or {})
        if per_rank:
            env.update(per_rank(r))
        for k in unset:
            env.pop(k, None)
        procs.append(subprocess.Popen(prog, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(name, procs, limit=60):
    """Each process's (rc, stdout, stderr), killing all at the deadline."""
    deadline = time.monotonic() + limit
    results = []
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            print(f"FAIL {name}: rank {r} still running at the deadline")
        results.append((p.returncode, out, err))
    return results


PERF_ARGS = ["all_reduce", "-b", "8", "-e", "256K", "-f", "8", "-n", "2"]


def check_table(name, results):
    ok = True
    for r, (rc, out, err) in enumerate(results):
        if rc != 0:
            print(f"FAIL {name}: rank {r} exited {rc}\n{out}{err}")
            ok = False
    table = results[0][1]
    rows = [l for l in table.splitlines() if l.strip() and not l.startswith("#")]
    wrong = [l for l in rows if l.split()[8] != "0" or l.split()[12] != "0"]
    if ok and (len(rows) < 3 or wrong or "3 ranks, 2 islands (nvidia: ranks 0-1, amd: rank 2)" not in table):
        print(f"FAIL {name}: unexpected table\n{table}")
        ok = False
    print(("PASS " if ok else "FAIL ") + f"{name}: {len(rows)} sizes validated on 3 ranks")
    return ok


def run_job(name, rank_vars, per_rank=None, extra=None):
    return check_table(name, finish(name, start([PERF] + PERF_ARGS, len(VENDORS), rank_vars, per_rank, extra)))


def torchrun(r, n):
    return {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n),
            "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "test"}


def slurm(r, n):
    return {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(n), "SLURM_LOCALID": str(r), "SLURM_JOB_ID": "4242",
            "SLURM_STEP_ID": "0", "SLURM_NNODES": "1"}


def slurm_nodelist():
    """Under srun without MASTER_ADDR: the rendezvous is on the step's first
    node, read from SLURM_STEP_NODELIST (this host's name first, a second
    node that never answers after it, as srun writes a two-node step)."""
    name = "Slurm variables without MASTER_ADDR: the first node of SLURM_STEP_NODELIST"
    host = socket.gethostname()
    extra = dict(LIST, SLURM_NNODES="2", SLURM_STEP_NODELIST="%s,gbnode-b" % host, **INFO_INIT)
    results = finish(name, start([PERF] + PERF_ARGS, len(VENDORS), slurm, extra=extra, unset=("MASTER_ADDR",)))
    ok = check_table(name, results)
    said = [l for _, _, err in results for l in err.splitlines()
            if "MASTER_ADDR is not set: the rendezvous is on %s, the first node of SLURM_STEP_NODELIST" % host in l]
    good = ok and len(said) == len(VENDORS)
    print(("PASS " if good else "FAIL ") + f"{name}: {len(said)} of {len(VENDORS)} ranks say so")
    return good


def openmpi(r, n):
    return {"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(n), "OMPI_COMM_WORLD_LOCAL_RANK": str(r),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(n), "OMPI_MCA_ess_base_jobid": "77"}


LIST = {"GPUBRIDGE_VENDORS": "nvidia:2,amd:1"}


def under_gpubridge_run():
    """The same list under gpubridge-run, without --vendors."""
    name = "GPUBRIDGE_VENDORS under gpubridge-run"
    env = clean_env()
    env.update(LIST)
    p = subprocess.run(harness.launch_cmd(3, [PERF] + PERF_ARGS, timeout=60), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=90)
    out = "\n".join(l[4:] if l.startswith("[0] ") else l for l in p.stdout.splitlines() if not l[:1] == "[" or
                    l.startswith("[0] "))
    return check_table(name, [(p.returncode, out, p.stderr)])


def world_size_mismatch(name, sizes, words):
    """Ranks started with these WORLD_SIZE values: every rank must fail
    with one text naming the mismatch, well within the timeout."""
    timeout = 30
    t0 = time.monotonic()
    procs = start([harness.program("rank_init")], len(sizes),
                  lambda r, n: dict(torchrun(r, n), WORLD_SIZE=str(sizes[r])),
                  per_rank=lambda r: {"GPUBRIDGE_VENDOR": "nvidia"}, extra={"GPUBRIDGE_TIMEOUT": str(timeout)})
    results = finish(name, procs, limit=2 * timeout)
    secs = time.monotonic() - t0
    texts = [[l for l in out.splitlines() if l.startswith("init-error: ")] for _, out, _ in results]
    first = texts[0][0] if texts[0] else ""
    ok = all(t == [first] for t in texts) and all(w in first for w in words) and secs < timeout / 3
    print(("PASS " if ok else "FAIL ") + f"{name}: {secs:.1f} s: {first or texts}")
    return ok


def info_logs():
    """GPUBRIDGE_DEBUG=INFO: one banner per process, the policy by name."""
    name = "INFO banner and policy name"
    with open(os.path.join(SOURCE, "VERSION")) as f:
        version = f.read().strip()
    procs = start([harness.program("rank_init")], 4, torchrun,
                  extra={"GPUBRIDGE_VENDORS": "nvidia:2,amd:2", "GPUBRIDGE_DEBUG": "INFO"})
    results = finish(name, procs)
    ok = True
    for r, (rc, out, err) in enumerate(results):
        banners = [l for l in err.splitlines() if " INFO INIT gpubridge version " in l]
        ready = [l for l in err.splitlines() if "rank %d of 4 ready:" % r in l]
        good = (rc == 0 and len(banners) == 1 and ("gpubridge version %s " % version) in banners[0]
                and len(ready) == 1 and re.search(r", policy (hierarchical|native|flat|split-rail)$", ready[0]) is not None)
        if not good:
            print(f"FAIL {name}: rank {r}: rc {rc}, banners {banners}, ready {ready}\n{err[-3000:]}")
        ok &= good
    print(("PASS " if ok else "FAIL ") + f"{name}: 4 ranks")
    return ok


INFO_INIT = {"GPUBRIDGE_DEBUG": "INFO", "GPUBRIDGE_DEBUG_SUBSYS": "INIT"}


def launcher_named():
    """The INFO line of each rank names who set RANK and WORLD_SIZE:
    gpubridge-run (GPUBRIDGE_LAUNCHER), torchrun (TORCHELASTIC_RUN_ID), or
    neither."""
    ok = True
    env = clean_env()
    env.update(INFO_INIT)
    p = subprocess.run(harness.launch_cmd(2, [harness.program("rank_init")], vendors="nvidia:2", timeout=60),
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
    jobs = [("gpubridge-run", p.returncode, p.stdout.splitlines(), "gpubridge-run's variables")]
    for name, vars_of, words in (("torchrun's variables", torchrun, "torchrun's variables"),
                                 ("RANK and WORLD_SIZE alone", lambda r, n: {"RANK": str(r), "WORLD_SIZE": str(n)},
                                  "the variables RANK and WORLD_SIZE")):
        results = finish(name, start([harness.program("rank_init")], 2, vars_of, extra=dict(INFO_INIT,
                                     GPUBRIDGE_VENDOR="nvidia")))
        lines = [l for _, _, err in results for l in err.splitlines()]
        jobs.append((name, max(rc for rc, _, _ in results), lines, words))
    for name, rc, lines, words in jobs:
        said = [l for l in lines if re.search(r"rank \d of 2 from ", l)]
        good = rc == 0 and len(said) == 2 and all(("from %s; rendezvous at " % words) in l for l in said)
        print(("PASS " if good else "FAIL ") + f"launcher named, {name}: {said}")
        ok &= good
    return ok


def cpu_island():
    """No GPU (GPUBRIDGE_DEVICE_BACKEND=host) and no vendor label: rank 0,
    and only rank 0, says at INFO that the job is one island "cpu" and how to
    simulate vendors."""
    name = "CPU job without vendors said at INFO"
    procs = start([harness.program("rank_init")], 3, torchrun, extra=dict(INFO_INIT, GPUBRIDGE_DEVICE_BACKEND="host"))
    results = finish(name, procs)
    said = [(r, l) for r, (_, _, err) in enumerate(results) for l in err.splitlines() if "on the CPU as one island" in l]
    want = ('no GPU and no GPUBRIDGE_VENDOR on any rank: the 3 ranks run on the CPU as one island "cpu"; to simulate '
            'vendor islands, set GPUBRIDGE_VENDORS (e.g. nvidia:2,amd:2) or gpubridge-run --vendors')
    ok = all(rc == 0 for rc, _, _ in results) and len(said) == 1 and said[0][0] == 0 and " INFO INIT " in said[0][1] \
        and said[0][1].endswith(want)
    print(("PASS " if ok else "FAIL ") + f"{name}: {said}")
    return ok


def unknown_vendor():
    """A misspelt label (nvida) still forms its own island, but rank 0 warns
    once, naming the label and the islands that formed."""
    name = "unknown vendor label warned about"
    procs = start([PERF] + PERF_ARGS, 3, torchrun, extra={"GPUBRIDGE_VENDORS": "nvidia,nvida,amd"})
    results = finish(name, procs)
    warns = [(r, l) for r, (_, _, err) in enumerate(results) for l in err.splitlines() if "no known vendor" in l]
    want = ("vendor label 'nvida' (rank 1) is no known vendor (nvidia, amd, intel, cpu), so it forms an island of "
            "its own; the islands are nvidia: rank 0; nvida: rank 1; amd: rank 2")
    ok = all(rc == 0 for rc, _, _ in results) and len(warns) == 1 and warns[0][0] == 0 and want in warns[0][1]
    print(("PASS " if ok else "FAIL ") + f"{name}: {warns}")
    return ok


def main():
    harness.require_built("rank_init")
    results = [
        run_job("torchrun variables, GPUBRIDGE_VENDOR per rank", torchrun,
                per_rank=lambda r: {"GPUBRIDGE_VENDOR": VENDORS[r]}),
        run_job("torchrun variables, GPUBRIDGE_VENDORS", torchrun, extra=LIST),
        run_job("Slurm variables, GPUBRIDGE_VENDORS", slurm, extra=LIST),
        run_job("Open MPI variables, GPUBRIDGE_VENDORS", openmpi, extra=LIST),
        slurm_nodelist(),
        under_gpubridge_run(),
        world_size_mismatch("WORLD_SIZE 2 on rank 3 of 4", [4, 4, 4, 2],
                            ["RANK=3 is not below WORLD_SIZE=2", "ranks 0-2 say WORLD_SIZE=4",
                             "disagree on the number of ranks"]),
        world_size_mismatch("WORLD_SIZE 2 on rank 0 of 4", [2, 4, 4, 4],
                            ["ranks disagree on the number of ranks: ", "rank 0 uses 2", "ranks 1-3 use 4"]),
        info_logs(),
        unknown_vendor(),
        launcher_named(),
        cpu_island(),
    ]
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
