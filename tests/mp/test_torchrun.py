#!/usr/bin/env python3
"""gbCommInitFromEnv under a real torchrun (python3 -m torch.distributed.run
--standalone --nproc-per-node 4 --no-python PROGRAM). torchrun's agent already
listens on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so rank 0 cannot
host the rendezvous there; the ranks meet through the agent's store instead.

- tests/rank_torchrun with GPUBRIDGE_VENDORS=nvidia:2,amd:2: every rank
  reports the islands nvidia:2,amd:2 and validates int32 and float32 sums
  (small and chunked counts);
- tests/rank_init --retries 2 with WORLD_SIZE unreadable on rank 1: two
  rounds of a failing init (rank 1 reports through the store's id, every
  rank names it) and one that succeeds at once: each init meets under its
  own key;
- GPUBRIDGE_VENDORS=nvidia:1,amd:2 (3 ranks for 4): every rank fails at once
  naming the list and WORLD_SIZE=4;
- without torchrun, its variables and a store the test hosts (torch's
  TCPStore): rank 1 alone says at INFO that the store answered its ping,
  naming this torch's version, then fails within GPUBRIDGE_TIMEOUT naming
  rank 0 and the store's key; with no store listening, it fails naming the
  store.

Runs with the torch of the Python running it: test_torchrun_oldest.py runs
it again with the oldest torch gpubridge supports (2.8).

Skips (77) only when torch is absent.

    python3 tests/mp/test_torchrun.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
TIMEOUT_S = 20


def torchrun(args, extra_env, job_s=120):
    """Runs torchrun; returns (rc, {rank: [lines]}, whole output, seconds)."""
    logs = tempfile.mkdtemp(prefix="gb-torchrun-")
    env = harness.clean_env(GPUBRIDGE_TIMEOUT=TIMEOUT_S, **extra_env)
    env = {k: v for k, v in env.items() if not k.startswith("TORCHELASTIC_")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(N),
           "--log-dir", logs, "--tee", "3", "--no-python"] + args
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=harness.scaled(job_s))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        out += "\n(killed after %d s)" % job_s
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    lines = {}
    for line in out.splitlines():
        if line.startswith("[default") and "]:" in line:
            tag, text = line.split("]:", 1)
            lines.setdefault(int(tag[len("[default"):]), []).append(text)
    return p.returncode, lines, out, time.monotonic() - t0


def islands_and_sums(suite):
    rc, lines, out, secs = torchrun([harness.program("rank_torchrun")], {"GPUBRIDGE_VENDORS": "nvidia:2,amd:2"})
    name = "torchrun, C ranks, GPUBRIDGE_VENDORS=nvidia:2,amd:2"
    print("%s: rc %s, %.1f s" % (name, rc, secs), flush=True)
    tail = out[-4000:]
    suite.check(rc == 0, name + ": every rank exits 0", tail)
    for r in range(N):
        got = lines.get(r, [])
        suite.check(any(l.startswith("topology: rank %d of 4, islands nvidia:2,amd:2," % r) for l in got),
                    name + ": rank %d sees islands nvidia:2,amd:2" % r, "\n".join(got) or tail)
        suite.check("all-reduce ok" in got, name + ": rank %d validated every all-reduce" % r, "\n".join(got) or tail)


def retries(suite):
    rounds = 2
    rc, lines, out, secs = torchrun([harness.program("rank_init"), "--retries", str(rounds), "--env-for-rank", "1",
                                     "WORLD_SIZE=x"], {"GPUBRIDGE_VENDORS": "nvidia:2,amd:2"})
    name = "torchrun, a failing init retried"
    print("%s: rc %s, %.1f s" % (name, rc, secs), flush=True)
    tail = out[-4000:]
    suite.check(rc == 0, name + ": every rank exits 0", tail)
    for r in range(N):
        got = lines.get(r, [])
        errors = [l for l in got if l.startswith("init-error: ")]
        suite.check(len(errors) == rounds and all("WORLD_SIZE=x" in e for e in errors),
                    name + ": rank %d's %d failing inits name WORLD_SIZE=x" % (r, rounds), "\n".join(got) or tail)
        suite.check(sum(l.startswith("init-ok") for l in got) == rounds, name + ": rank %d's retries succeed" % r,
                    "\n".join(got) or tail)
    suite.check(secs < 4 * TIMEOUT_S, name + ": done well within the timeouts (%.1f s)" % secs)


def vendors_mismatch(suite):
    rc, lines, out, secs = torchrun([harness.program("rank_torchrun"), "--expect-fail"],
                                    {"GPUBRIDGE_VENDORS": "nvidia:1,amd:2"})
    name = "torchrun, GPUBRIDGE_VENDORS naming 3 ranks of 4"
    print("%s: rc %s, %.1f s" % (name, rc, secs), flush=True)
    tail = out[-4000:]
    want = "GPUBRIDGE_VENDORS=nvidia:1,amd:2 names 3 ranks, but WORLD_SIZE=4"
    texts = {r: [l for l in lines.get(r, []) if l.startswith("init-error: ")] for r in range(N)}
    suite.check(rc == 0 and all(len(texts[r]) == 1 and want in texts[r][0] for r in range(N)),
                name + ": every rank's init fails naming the list and WORLD_SIZE", tail)
    suite.check(len({texts[r][0] if texts[r] else "" for r in range(N)}) == 1,
                name + ": the same text on every rank", str(texts))
    suite.check(secs < TIMEOUT_S, name + ": at once, not after GPUBRIDGE_TIMEOUT (%.1f s)" % secs)


def store_env(rank, port, timeout, **extra):
    return harness.clean_env(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=rank, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                             MASTER_PORT=port, TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RUN_ID="gbtest",
                             TORCHELASTIC_RESTART_COUNT=0, GPUBRIDGE_VENDOR="nvidia", GPUBRIDGE_TIMEOUT=timeout,
                             **extra)


def run_alone(env, limit):
    t0 = time.monotonic()
    p = subprocess.run([harness.program("rank_torchrun"), "--expect-fail"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=harness.scaled(limit))
    return p.returncode, p.stdout, time.monotonic() - t0


def store_failures(suite, torch):
    timeout = 3
    port = harness.free_port()
    store = torch.distributed.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    try:
        rc, out, secs = run_alone(store_env(1, port, timeout, GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_SUBSYS="BOOT"), 30)
    finally:
        del store
    name = "rank 1 alone with torchrun's store"
    print("%s: %.1f s: %s" % (name, secs, out.strip()[-400:]), flush=True)
    suite.check(rc == 0 and "rank 1 waited 3 s for rank 0 to publish the rendezvous address in torchrun's store"
                in out and "/gpubridge/gbtest/0/0/unique_id" in out, name + ": fails naming rank 0 and the key", out)
    suite.check(timeout - 0.5 < secs < timeout + 5, name + ": after GPUBRIDGE_TIMEOUT=%d s (%.1f s)" % (timeout, secs))
    said = "torchrun's store at 127.0.0.1:%d answers as torch's TCPStore (tested: torch 2.8 to 2.13; torch here is %s)" % (
        port, torch.__version__)
    suite.check(said in out, name + ": the store answered gpubridge's ping, torch %s named at INFO" % torch.__version__,
                out)

    rc, out, secs = run_alone(store_env(1, harness.free_port(), timeout), 30)
    name = "no store on MASTER_PORT"
    print("%s: %.1f s: %s" % (name, secs, out.strip()[-400:]), flush=True)
    suite.check(rc == 0 and "cannot reach torchrun's store at 127.0.0.1:" in out and "MASTER_ADDR:MASTER_PORT" in out,
                name + ": fails naming the store", out)
    suite.check(secs < timeout + 5, name + ": within GPUBRIDGE_TIMEOUT (%.1f s)" % secs)


def main():
    try:
        import torch
        import torch.distributed  # noqa: F401
    except ImportError:
        print("SKIP: torch is not installed (torchrun comes with it)")
        sys.exit(77)
    harness.require_built("rank_torchrun", "rank_init")
    print("torch %s (%s)" % (torch.__version__, sys.executable), flush=True)
    suite = harness.Suite("torchrun")
    islands_and_sums(suite)
    retries(suite)
    vendors_mismatch(suite)
    store_failures(suite, torch)
    suite.done()


if __name__ == "__main__":
    main()
