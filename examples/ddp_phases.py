"""Where a DDP step's communication time goes: island or bridge.

4 processes, 2 simulated NVIDIA and 2 simulated AMD ranks, train a small
model with DDP over gpubridge. Each rank watches its communicator with
gpubridge.observe(), which hands over one record per finished all-reduce
(DDP's gradient buckets), and adds up per step the time its collectives
spent in each phase; rank 0 prints the breakdown of every rank and the
communicator's counters. No GPU needed:

    python examples/ddp_phases.py [--steps 6] [--vendors nvidia:2,amd:2]

Phases (docs/PYTHON.md): island = the island steps (on an island's leader,
before the chunk is staged for the bridge and after it came back; on the
other ranks the whole call, since they wait inside their island for the
leader), wait = staged until the proxy starts the bridge step, bridge = the
bridge step among the islands' leaders, check = the call check. Calls of one
step can overlap (DDP all-reduces a bucket while backward computes the next),
so the sum over calls can exceed the step's wall time.
"""
import argparse
import os
import sys
import threading
import time

import local_job

FIELDS = ("calls", "bytes", "check", "island", "wait", "bridge", "total", "step")


def vendor_list(spec):
    out = []
    for part in spec.split(","):
        name, _, n = part.partition(":")
        out += [name] * int(n or 1)
    return out


def rank_main(rank, port, vendors, steps, warmup):
    os.environ.update(GPUBRIDGE_VENDOR=vendors[rank], OMP_NUM_THREADS="1")
    os.environ.setdefault("GPUBRIDGE_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gpubridge

    world = len(vendors)
    dist.init_process_group("gpubridge", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.Tanh(), nn.Linear(512, 256), nn.Tanh(), nn.Linear(256, 1))
    ddp = DDP(model, bucket_cap_mb=0.25)  # ~1 MiB of gradients in several buckets: several all-reduces a step
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)

    records = []
    arrived = threading.Condition()

    def on_record(rec):  # on the observer's dispatcher thread
        with arrived:
            records.append(rec)
            arrived.notify_all()

    handle = gpubridge.observe(None, on_record)  # None: the default process group
    gen = torch.Generator().manual_seed(100 + rank)
    sums = [0.0] * len(FIELDS)
    policies = set()
    for step in range(warmup + steps):
        before = gpubridge.counters()["enqueued"]
        t0 = time.perf_counter()
        x = torch.randn(64, 256, generator=gen)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the buckets and waits for them here
        opt.step()
        wall = time.perf_counter() - t0
        after = gpubridge.counters()["enqueued"]
        with arrived:  # the records of this step's calls, with a deadline
            if not arrived.wait_for(lambda: sum(r["seq"] > before for r in records) >= after - before, 60):
                raise RuntimeError("rank %d: the observer did not get step %d's records within 60 s" % (rank, step))
            mine = [r for r in records if before < r["seq"] <= after]
            del records[:]
        if step < warmup:
            continue
        for r in mine:
            policies.add(r["policy"])
            d = r["durations_s"]
            sums[0] += 1
            sums[1] += sum(r["bytes"][g] for g in ("world", "bridge", "rail"))
            sums[2] += d["check"]
            sums[3] += d["island_before"] + (d["after"] if r["host_step"] else 0.0)
            sums[4] += d["wait_proxy"]
            sums[5] += d["bridge"]
            sums[6] += d["total"]
        sums[7] += wall
    handle.remove()

    # Every rank's means per step, gathered to rank 0 (after the observed steps).
    mean = torch.tensor([v / steps for v in sums], dtype=torch.float64)
    table = torch.empty(world * len(FIELDS), dtype=torch.float64)
    getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(table, mean)  # renamed in torch 2.13
    counters = gpubridge.counters()
    if rank == 0:
        t = gpubridge.get_topology()
        print("DDP over gpubridge: %d ranks, islands %s, policy %s (rank 0's calls ran %s); means per step over "
              "%d steps (after %d warm-up)" % (world, ",".join("%s:%d" % (v, n) for v, n in zip(
                  t["island_vendor"], t["island_size"])), t["policy"], ", ".join(sorted(policies)), steps, warmup))
        print("rank  vendor  leader  calls  host bytes   check ms  island ms   wait ms  bridge ms  in calls ms"
              "   step ms")
        leaders = set(t["leader_of_island"])
        for r in range(world):
            v = table[r * len(FIELDS):(r + 1) * len(FIELDS)].tolist()
            print("%4d  %6s  %6s  %5.0f  %10.0f  %9.3f  %9.3f  %8.3f  %9.3f  %11.3f  %8.3f" % (
                r, vendors[r], "yes" if r in leaders else "no", v[0], v[1], *[1e3 * x for x in v[2:]]))
        print("rank 0 counters since init: %d collectives (%s), bytes sent %s, proxy busy ms %s, mean latency %.3f ms"
              % (counters["completed"], ", ".join("%s %d" % kv for kv in counters["by_coll"].items() if kv[1]),
                 counters["bytes"], {g: round(s * 1e3, 3) for g, s in counters["busy_s"].items()},
                 1e3 * counters["latency_s"] / max(1, counters["completed"])), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="steps measured (6)")
    ap.add_argument("--warmup", type=int, default=2, help="steps run first and not counted (2)")
    ap.add_argument("--vendors", default="nvidia:2,amd:2", help="simulated ranks per vendor (nvidia:2,amd:2)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before the job is stopped")
    args = ap.parse_args()
    vendors = vendor_list(args.vendors)
    return local_job.run_ranks(rank_main, len(vendors), (vendors, args.steps, args.warmup), args.timeout)

if __name__ == "__main__":
    sys.exit(main())
