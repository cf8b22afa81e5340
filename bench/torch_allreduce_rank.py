#!/usr/bin/env python3
"""One rank of bench/entry_points.py: fp32 all-reduce (sum, in place)
through a torch.distributed backend, as an outside torch client sees it:
--backend gpubridge (import gpubridge registers it) or nccl (the drop-in
when LD_PRELOAD names it). Per size one checked call, -w warm-up calls, a
barrier, then -n calls back to back and the mean time per call, averaged
over the ranks, as gpubridge-perf times. On a GPU the time is CUDA events on
the current stream around the -n calls (each call's wait() makes that stream
wait for it); on the CPU the wall clock from the first call to the last
work.wait(). Start WORLD_SIZE processes with torchrun's variables; rank 0
prints one JSON object a size: size_bytes, time_us, algbw_gbps, busbw_gbps,
wrong."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

from perfjob import size_arg


def timed(x, n, cuda):
    if cuda:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            dist.all_reduce(x)
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3 / n
    t0 = time.perf_counter()
    works = [dist.all_reduce(x, async_op=True) for _ in range(n)]
    for w in works:
        w.wait()
    return (time.perf_counter() - t0) / n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1M,25M,256M", help="comma-separated sizes in bytes (1024-based K/M/G)")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("-w", type=int, default=3)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--backend", default="gpubridge", choices=("gpubridge", "nccl"))
    a = p.parse_args()
    cuda = a.device == "cuda"
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if a.backend == "gpubridge":
        import gpubridge  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    for size in [size_arg(s) for s in a.sizes.split(",")]:
        count = max(1, size // 4)
        x = torch.full((count,), float(rank + 1), dtype=torch.float32, device=dev)
        dist.all_reduce(x)
        wrong = torch.tensor([float((x != n * (n + 1) / 2).sum().item())], dtype=torch.float64, device=dev)
        for _ in range(a.w):
            dist.all_reduce(x)
        dist.barrier()
        t = torch.tensor([timed(x, a.n, cuda)], dtype=torch.float64, device=dev)
        dist.all_reduce(t)
        dist.all_reduce(wrong)
        if rank == 0:
            sec = t.item() / n
            algbw = count * 4 / sec / 1e9
            print(json.dumps({"size_bytes": count * 4, "time_us": sec * 1e6, "algbw_gbps": algbw,
                              "busbw_gbps": algbw * 2.0 * (n - 1) / n, "wrong": int(wrong.item())}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
