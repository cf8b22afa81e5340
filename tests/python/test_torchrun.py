"""The Python package under a real torchrun (python3 -m torch.distributed.run
--standalone --nproc-per-node 4): the agent listens on MASTER_PORT with its
store (TORCHELASTIC_USE_AGENT_STORE=True), so gpubridge must meet through that
store, not bind MASTER_PORT. Islands come from GPUBRIDGE_VENDORS=nvidia:2,amd:2,
each rank taking the label of its RANK.

- direct API: gpubridge.init(), then all_reduce of a float32 and an int64
  tensor (sum, and avg for the float), checked against the sums computed from
  every rank's inputs; the topology must be nvidia:2, amd:2; then
  gpubridge.destroy().
- backend: init_process_group(backend="gpubridge") with torchrun's env://,
  all_reduce (sum) and all_gather_into_tensor checked the same way, on the
  default group and on new_group([1, 2]) (ranks of both islands).

Every rank prints "ok <case>"; the driver requires 4 of each, rc 0, within
the deadline. Skips (77) only when torch is absent.

    python3 tests/python/test_torchrun.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

N = 4
TIMEOUT_S = 30  # GPUBRIDGE_TIMEOUT
JOB_S = 150     # the whole torchrun job


def inputs(torch, rank, n, dtype):
    return torch.arange(n, dtype=dtype) % 89 + (rank + 1) * 100


def expected(torch, n, dtype):
    want = torch.zeros(n, dtype=dtype)
    for r in range(N):
        want += inputs(torch, r, n, dtype)
    return want


def direct(torch):
    import gpubridge
    comm = gpubridge.init()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    topo = gpubridge.get_topology()
    sizes = dict(zip(topo["island_vendor"], topo["island_size"]))
    gbtest.check(sizes == {"nvidia": 2, "amd": 2}, "rank %d: islands %s, want nvidia:2, amd:2" % (rank, sizes))
    for dtype, n in ((torch.float32, 1001), (torch.int64, 70001)):
        t = inputs(torch, rank, n, dtype)
        gpubridge.all_reduce(t)
        gbtest.check(torch.equal(t, expected(torch, n, dtype)), "rank %d: direct all_reduce %s wrong" % (rank, dtype))
    t = inputs(torch, rank, 1001, torch.float32)
    gpubridge.all_reduce(t, op="avg")
    gbtest.check(torch.allclose(t, expected(torch, 1001, torch.float32) / world),
                 "rank %d: direct all_reduce avg wrong" % rank)
    gpubridge.destroy(comm)
    print("ok direct rank %d" % rank, flush=True)


def backend(torch):
    import torch.distributed as dist
    import gpubridge  # noqa: F401 (registers the backend)
    dist.init_process_group(backend="gpubridge")
    rank, world = dist.get_rank(), dist.get_world_size()
    gbtest.check(world == N, "rank %d: world size %d" % (rank, world))
    t = inputs(torch, rank, 5003, torch.float32)
    dist.all_reduce(t)
    gbtest.check(torch.equal(t, expected(torch, 5003, torch.float32)), "rank %d: backend all_reduce wrong" % rank)
    mine = inputs(torch, rank, 7, torch.int32)
    out = torch.empty(7 * world, dtype=torch.int32)
    dist.all_gather_into_tensor(out, mine)
    want = torch.cat([inputs(torch, r, 7, torch.int32) for r in range(world)])
    gbtest.check(torch.equal(out, want), "rank %d: backend all_gather wrong" % rank)
    group = dist.new_group([1, 2])
    if rank in (1, 2):
        t = torch.full((33,), float(rank), dtype=torch.float32)
        dist.all_reduce(t, group=group)
        gbtest.check(torch.equal(t, torch.full((33,), 3.0)), "rank %d: subgroup all_reduce wrong" % rank)
    dist.barrier()
    dist.destroy_process_group()
    print("ok backend rank %d" % rank, flush=True)


def worker(case):
    torch = gbtest.require_torch()
    gbtest.setup_path()
    {"direct": direct, "backend": backend}[case](torch)


def run_case(case):
    logs = tempfile.mkdtemp(prefix="gb-torchrun-")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUBRIDGE_", "TORCHELASTIC_", "OMPI_", "SLURM_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(GPUBRIDGE_VENDORS="nvidia:2,amd:2", GPUBRIDGE_TIMEOUT=str(TIMEOUT_S),
               PYTHONPATH=gbtest.PACKAGE_DIR + os.pathsep + env.get("PYTHONPATH", ""))
    if os.environ.get("GPUBRIDGE_LIBRARY"):
        env["GPUBRIDGE_LIBRARY"] = os.environ["GPUBRIDGE_LIBRARY"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(N),
           "--log-dir", logs, "--tee", "3", os.path.abspath(__file__), "--torchrun-worker", case]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=JOB_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        out += "\n(killed after %d s)" % JOB_S
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    elapsed = time.monotonic() - t0
    oks = sorted(l.split("ok %s rank " % case)[1] for l in out.splitlines() if ("ok %s rank " % case) in l)
    good = p.returncode == 0 and oks == [str(r) for r in range(N)]
    print("%s %s under torchrun: rc %s, ranks ok %s, %.1f s" % ("PASS" if good else "FAIL", case, p.returncode,
                                                                 oks, elapsed), flush=True)
    if not good:
        print(out[-6000:])
    return good


def main():
    if "--torchrun-worker" in sys.argv:
        return worker(sys.argv[sys.argv.index("--torchrun-worker") + 1])
    gbtest.require_torch()
    gbtest.require_library()
    results = [run_case("direct"), run_case("backend")]
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
