#!/usr/bin/env python3
"""One rank of bench/train_step.py: training steps of a stack of --layers
Linear(W, W) layers (W from --params), one batch of --batch rows per rank,
loss = mean square of the output, SGD. Under DDP over --backend gpubridge
(import gpubridge registers it) or nccl (the drop-in when LD_PRELOAD names
it), started with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, LOCAL_RANK); with --alone the same steps in one process, no
process group, no communication.

Each step is timed on the host clock and ends with a device synchronize
(--device cuda). Rank 0 prints one JSON object: step_ms (the median over
the measured steps, the largest of the ranks'), mean_ms, min_ms, params,
grad_bytes (what DDP all-reduces each step: every gradient once), and under
gpubridge bridge_bytes (what rank 0 sent per step in the host groups world,
bridge and rail, from gpubridge.counters()) and calls (all-reduces a step)."""
import argparse
import json
import math
import os
import statistics
import time

import torch


def width_for(params, layers):
    """The width W, a multiple of 64, whose layers x Linear(W, W) come nearest to params."""
    return max(64, int(round(math.sqrt(params / layers) / 64)) * 64)


def make_model(width, layers, dev):
    torch.manual_seed(0)
    mods = []
    for k in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if k < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods).to(dev)


def timed_steps(model, x, steps, warmup, sync):
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    times, loss = [], None
    for k in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # under DDP: the buckets' all-reduces, waited for here
        opt.step()
        sync()
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return [t * 1e3 for t in times], loss.item()


def bridge_traffic(before, steps):
    """Bytes rank 0 sent per step through the bridge's host groups and calls a step, once every call finished."""
    import gpubridge
    deadline = time.monotonic() + 30
    now = gpubridge.counters()
    while now["completed"] + now["failed"] < now["enqueued"] and time.monotonic() < deadline:
        time.sleep(0.01)
        now = gpubridge.counters()
    sent = sum(now["bytes"][g] - before["bytes"][g] for g in ("world", "bridge", "rail"))
    return sent // steps, (now["enqueued"] - before["enqueued"]) / steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--params", type=float, default=134e6)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--backend", default="gpubridge", choices=("gpubridge", "nccl"))
    p.add_argument("--alone", action="store_true", help="one process, no communication")
    a = p.parse_args()
    if a.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        dev, sync = torch.device("cuda", local), torch.cuda.synchronize
    else:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        dev, sync = torch.device("cpu"), (lambda: None)
    width = width_for(a.params, a.layers)
    model = make_model(width, a.layers, dev)
    nparams = sum(q.numel() for q in model.parameters())
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters() if q.requires_grad)
    out = {"params": nparams, "width": width, "layers": a.layers, "batch": a.batch, "grad_bytes": grad_bytes,
           "device": a.device}
    if a.alone:
        rank = 0
        x = torch.randn(a.batch, width, generator=torch.Generator().manual_seed(100)).to(dev)
        times, out["loss"] = timed_steps(model, x, a.steps, a.warmup, sync)
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        if a.backend == "gpubridge":
            import gpubridge
        dist.init_process_group(a.backend)
        rank, world = dist.get_rank(), dist.get_world_size()
        ddp = DDP(model, device_ids=[dev.index] if a.device == "cuda" else None, bucket_cap_mb=a.bucket_mb)
        x = torch.randn(a.batch, width, generator=torch.Generator().manual_seed(100 + rank)).to(dev)
        timed_steps(ddp, x, 0, a.warmup, sync)  # warm-up first, so the counters see only measured steps
        before = gpubridge.counters() if a.backend == "gpubridge" else None
        times, out["loss"] = timed_steps(ddp, x, a.steps, 0, sync)
        if before is not None:
            out["bridge_bytes"], out["calls"] = bridge_traffic(before, a.steps)
            out["topology"] = {k: v for k, v in gpubridge.get_topology().items()
                               if k in ("run_kind", "policy", "split_test", "island_vendor")}
        worst = torch.tensor([statistics.median(times), statistics.mean(times), min(times)], dtype=torch.float64,
                             device=dev)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # the slowest rank's, as the job's step
        times_all = worst.tolist()
        dist.destroy_process_group()
    if rank == 0:
        if a.alone:
            out.update(step_ms=statistics.median(times), mean_ms=statistics.mean(times), min_ms=min(times))
        else:
            out.update(step_ms=times_all[0], mean_ms=times_all[1], min_ms=times_all[2], world=world)
        out["steps"], out["warmup"] = a.steps, a.warmup
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
