#!/usr/bin/env python3
"""A plain DDP job with backend "nccl", nothing gpubridge-specific in it:
tests/gpu/run_drop_in.sh runs it as is under torchrun, once on NCCL and
again with LD_PRELOAD=libgpubridge-nccl.so (whose nccl* functions then serve
torch's NCCL calls).

Default: a few collectives with integer data checked against values
computed here (all_reduce, broadcast, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, batch_isend_irecv, a new_group,
barrier), then DDP training of a small MLP with fixed seeds. Each rank
prints "ddp-result rank R world W steps S loss L checksum C", C being an
integer digest of the final parameters: DDP keeps them identical on every
rank (checked here), and runs that sum the same gradients in the same
order print the same C.

--bench: all_reduce float32, -b .. -e bytes (factor -f), -n timed
iterations after -w warm-up ones, one synchronize; rank 0 prints
"busbw LABEL SIZE bytes T us busbw X GB/s" (busbw = S/t * 2(n-1)/n).

    torchrun --standalone --nproc_per_node 2 tests/gpu/ddp_nccl.py [--steps 20]
    torchrun --standalone --nproc_per_node 2 tests/gpu/ddp_nccl.py --bench --label plain
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def expect(ok, what):
    if not ok:
        print("rank %d: FAIL: %s" % (dist.get_rank(), what), flush=True)
        sys.exit(1)


def checks(rank, n, dev):
    idx = torch.arange(1000, dtype=torch.int64, device=dev)
    x = (rank + 1) * idx
    dist.all_reduce(x)
    expect(torch.equal(x, n * (n + 1) // 2 * idx), "all_reduce sum")
    x = idx + 7 if rank == n - 1 else torch.zeros_like(idx)
    dist.broadcast(x, src=n - 1)
    expect(torch.equal(x, idx + 7), "broadcast")
    out = torch.empty(n * 1000, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(out, idx + 1000 * rank)
    expect(torch.equal(out, torch.arange(n * 1000, dtype=torch.int64, device=dev)), "all_gather_into_tensor")
    full = torch.arange(n * 1000, dtype=torch.int64, device=dev) + rank
    part = torch.empty(1000, dtype=torch.int64, device=dev)
    dist.reduce_scatter_tensor(part, full)
    expect(torch.equal(part, n * (idx + 1000 * rank) + n * (n - 1) // 2), "reduce_scatter_tensor")
    src = torch.arange(n * 10, dtype=torch.int64, device=dev) + 100 * rank
    got = torch.empty_like(src)
    dist.all_to_all_single(got, src)
    want = torch.cat([torch.arange(10, dtype=torch.int64, device=dev) + 10 * rank + 100 * p for p in range(n)])
    expect(torch.equal(got, want), "all_to_all_single")
    recv = torch.empty(1000, dtype=torch.int64, device=dev)
    ops = [dist.P2POp(dist.isend, idx * (rank + 1), (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect(torch.equal(recv, idx * ((rank - 1) % n + 1)), "batch_isend_irecv ring")
    group = dist.new_group(list(range(n)))
    y = torch.full((8,), rank + 1, dtype=torch.int32, device=dev)
    dist.all_reduce(y, op=dist.ReduceOp.MAX, group=group)
    expect(torch.equal(y, torch.full_like(y, n)), "all_reduce max on a new_group")
    dist.barrier()
    print("checks ok: rank %d" % rank, flush=True)


def train(rank, n, local, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss = None
    for step in range(steps):
        g = torch.Generator(device="cuda").manual_seed(1000 + step * n + rank)
        x = torch.randn(64, 512, device="cuda", generator=g)
        y = torch.randn(64, 512, device="cuda", generator=g)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    words = flat.view(torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 9973 + 1
    digest = torch.tensor([int(((words % 1000003) * weights).sum().item())], dtype=torch.int64, device="cuda")
    lo, hi = digest.clone(), digest.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    expect(torch.equal(lo, hi), "DDP parameters differ between ranks (digests %d .. %d)" % (lo.item(), hi.item()))
    print("ddp-result rank %d world %d steps %d loss %.9g checksum %d" % (rank, n, steps, loss.item(), digest.item()),
          flush=True)


def bench(rank, n, a):
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
        if rank == 0:
            print("busbw %s %12d bytes %10.1f us busbw %8.2f GB/s" % (a.label, s, t * 1e6, s / t / 1e9 * 2 * (n - 1) / n),
                  flush=True)
        s *= a.f


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bench", action="store_true")
    p.add_argument("--label", default="run")
    p.add_argument("-b", type=size, default=1 << 20)
    p.add_argument("-e", type=size, default=1 << 30)
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.bench:
        bench(rank, n, a)
    else:
        checks(rank, n, torch.device("cuda", local))
        train(rank, n, local, a.steps)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
