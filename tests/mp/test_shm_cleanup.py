#!/usr/bin/env python3
"""Nothing a job creates in /dev/shm outlives it, even when a rank is killed
(SIGKILL) at a random moment of start-up, while same-host peers set up their
shared-memory rings.

Each trial starts the ranks of nvidia:2,amd:2 directly (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT; so this suite knows every rank's pid), each running
rank_init (init, then destroy), and SIGKILLs one rank chosen at random after a
random delay within the time a clean start-up takes here (measured first).
Once every rank has ended (the survivors fail within GPUBRIDGE_TIMEOUT), no
/dev/shm entry may carry the name of one of the job's processes
(`gpubridge-<pid>-...`, the name a segment would have).
Seeded (GB_TEST_SEED) and bounded in time; GB_TEST_TRIALS sets the count."""
import os
import random
import signal
import subprocess
import time

import harness

TRIALS = int(os.environ.get("GB_TEST_TRIALS", "30"))
SEED = int(os.environ.get("GB_TEST_SEED", str(int(time.time()) % 100000)))
VENDORS = harness.vendor_list("nvidia:2,amd:2")
TIMEOUT_S = 3  # GPUBRIDGE_TIMEOUT: how long survivors wait for the dead rank
SHM = "/dev/shm"


def shm_entries():
    try:
        return {n for n in os.listdir(SHM) if n.startswith("gpubridge")}
    except FileNotFoundError:
        return set()


def start_job():
    port = harness.free_port()
    procs = []
    for r, vendor in enumerate(VENDORS):
        env = harness.clean_env(RANK=r, WORLD_SIZE=len(VENDORS), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                GPUBRIDGE_VENDOR=vendor, GPUBRIDGE_TIMEOUT=TIMEOUT_S)
        procs.append(subprocess.Popen([harness.program("rank_init")], env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      errors="replace"))
    return procs


def reap(procs, timeout):
    """Waits for every rank up to timeout s; SIGKILLs and names the ones left."""
    end = time.monotonic() + timeout
    stuck = []
    for r, p in enumerate(procs):
        try:
            p.communicate(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            stuck.append(r)
            p.kill()
            p.communicate()
    return stuck


def clean_startup_seconds(suite):
    """Median wall time of three clean jobs: the window the kills fall in."""
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        procs = start_job()
        stuck = reap(procs, 60)
        times.append(time.monotonic() - t0)
        if stuck or any(p.returncode != 0 for p in procs):
            suite.check(False, "a clean start-up of nvidia:2,amd:2 succeeds",
                        "exit codes %s, stuck %s" % ([p.returncode for p in procs], stuck))
            suite.done()
    return sorted(times)[1]


def main():
    harness.require_built("rank_init")
    suite = harness.Suite("test_shm_cleanup")
    rng = random.Random(SEED)
    window = clean_startup_seconds(suite)
    print("seed %d; %d trials; clean start-up takes %.3f s: kills fall in [0, %.3f] s" %
          (SEED, TRIALS, window, window), flush=True)
    before = shm_entries()
    leaked, appeared, stuck_jobs = [], set(), []
    for t in range(TRIALS):
        victim = rng.randrange(len(VENDORS))
        delay = rng.uniform(0.0, window)
        procs = start_job()
        time.sleep(delay)  # the random moment of the kill, not a synchronisation
        try:
            os.kill(procs[victim].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stuck = reap(procs, TIMEOUT_S + 30)
        if stuck:
            stuck_jobs.append((t, stuck))
        pids = {str(p.pid) for p in procs}
        now = shm_entries()
        mine = sorted(n for n in now if n.split("-")[1:2] and n.split("-")[1] in pids)
        if mine:
            leaked.append((t, victim, delay, mine))
        appeared |= now - before
    for t, victim, delay, names in leaked:
        print("  trial %d: rank %d killed after %.3f s left %s" % (t, victim, delay, ", ".join(names)))
    suite.check(not leaked, "no /dev/shm entry of a job's process remains after %d start-up kills "
                "(%d trials left %d)" % (TRIALS, len(leaked), sum(len(n) for _, _, _, n in leaked)))
    # Entries named after other processes come from jobs started elsewhere on
    # this machine (which may run while this suite does): shown, not judged.
    others = sorted(n for n in appeared if os.path.exists(os.path.join(SHM, n)))
    if others:
        print("note: gpubridge entries of other processes in %s: %s" % (SHM, ", ".join(others)))
    suite.check(not stuck_jobs, "every rank ended within GPUBRIDGE_TIMEOUT + 30 s of the kill",
                "trials and ranks still running: %s" % stuck_jobs)
    # What this suite left behind would make the next run fail: remove it.
    for t, victim, delay, names in leaked:
        for n in names:
            try:
                os.unlink(os.path.join(SHM, n))
            except OSError:
                pass
    suite.done()


main()
