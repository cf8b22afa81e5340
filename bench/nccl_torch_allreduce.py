#!/usr/bin/env python3
"""Baseline: raw NCCL all-reduce through torch.distributed, timed like
gpubridge-perf (n iterations enqueued, one synchronize; busbw = algbw *
2(n-1)/n). Run with: torchrun --nproc_per_node 2 bench/nccl_torch_allreduce.py
[-b 1M] [-e 1G] [-f 4] [-n 20] [-w 5] [--label L]. Rank 0 prints
`L SIZE bytes T us busbw X GB/s` lines (L: nccl-torch unless given).
tests/gpu/run_drop_in.sh runs it as is and with LD_PRELOAD=libgpubridge-nccl.so.
With one GPU every rank uses it (LOCAL_RANK modulo the GPU count)."""
import argparse
import os
import time

import torch
import torch.distributed as dist


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


p = argparse.ArgumentParser()
p.add_argument("-b", type=size, default=1 << 20)
p.add_argument("-e", type=size, default=1 << 30)
p.add_argument("-f", type=int, default=4)
p.add_argument("-n", type=int, default=20)
p.add_argument("-w", type=int, default=5)
p.add_argument("--label", default="nccl-torch")
a = p.parse_args()

local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
n = dist.get_world_size()
s = a.b
while s <= a.e:
    x = torch.ones(s // 4, dtype=torch.float32, device="cuda")
    for _ in range(a.w):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.n):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / a.n
    if dist.get_rank() == 0:
        algbw = s / t / 1e9
        print(f"{a.label} {s:>12d} bytes {t * 1e6:10.1f} us busbw {algbw * 2 * (n - 1) / n:8.2f} GB/s", flush=True)
    s *= a.f
dist.destroy_process_group()
