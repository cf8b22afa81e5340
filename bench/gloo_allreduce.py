#!/usr/bin/env python3
"""One rank of the Gloo baseline: fp32 all-reduce (sum, in place) through
torch.distributed's gloo backend on the CPU, timed like gpubridge-perf: per
size one checked call, -w warm-up calls, then -n calls and the mean time per
call, averaged over ranks. Start WORLD_SIZE processes with RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set (torchrun does); rank 0 prints one JSON
object a size: size_bytes, time_us, algbw_gbps, busbw_gbps, wrong."""
import argparse
import json
import time

import torch
import torch.distributed as dist

from perfjob import size_arg, sizes

p = argparse.ArgumentParser()
p.add_argument("-b", type=size_arg, default=8)
p.add_argument("-e", type=size_arg, default=64 << 20)
p.add_argument("-f", type=int, default=2)
p.add_argument("-n", type=int, default=20)
p.add_argument("-w", type=int, default=5)
a = p.parse_args()

dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
factor = 2.0 * (n - 1) / n
for size in sizes(a.b, a.e, a.f):
    count = max(1, size // 4)
    x = torch.full((count,), float(rank + 1), dtype=torch.float32)
    dist.all_reduce(x)
    wrong = torch.tensor([int((x != n * (n + 1) / 2).sum())], dtype=torch.float64)
    for _ in range(a.w):
        dist.all_reduce(x)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.n):
        dist.all_reduce(x)
    t = torch.tensor([(time.perf_counter() - t0) / a.n], dtype=torch.float64)
    dist.all_reduce(t)
    dist.all_reduce(wrong)
    if rank == 0:
        sec = t.item() / n
        algbw = count * 4 / sec / 1e9
        print(json.dumps({"size_bytes": count * 4, "time_us": sec * 1e6, "algbw_gbps": algbw,
                          "busbw_gbps": algbw * factor, "wrong": int(wrong.item())}), flush=True)
dist.destroy_process_group()
