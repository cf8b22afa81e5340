#!/usr/bin/env python3
"""A plain training job on torch.distributed, nothing gpubridge-specific in
it but the backend's name: --backend nccl (default) or gpubridge (then
`import gpubridge` registers it). tests/gpu/run_drop_in.sh runs it with
backend "nccl" as is under torchrun, once on NCCL and again with
LD_PRELOAD=libgpubridge-nccl.so (whose nccl* functions then serve torch's
NCCL calls); tests/gpu/run_training.sh runs it with backend "gpubridge".

Default: a few collectives with integer data checked against values
computed here (all_reduce, broadcast, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, batch_isend_irecv, a new_group,
barrier), then training of a small MLP with fixed seeds, under DDP or (with
--fsdp) FSDP2's fully_shard. Rank 0 prints "loss-curve MODE step S loss L"
for every step (its own batch's loss); each rank prints "MODE-result rank R
world W steps S loss L checksum C", C being an integer digest of the final
(full) parameters: they are identical on every rank (checked here), and runs
that sum the same gradients in the same order print the same C.

With one GPU every rank uses it (LOCAL_RANK modulo the GPU count): NCCL
refuses two ranks on one GPU, gpubridge's split-test and emulated-AMD
islands of one rank each do not.

    torchrun --standalone --nproc_per_node 2 tests/gpu/train_job.py [--steps 20] [--fsdp] [--backend gpubridge]

--device cpu trains on CPU tensors (simulated islands: the cluster kit's
check in CI, scripts/cluster/train.py), --width the hidden layer's width.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


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


def make_model(width, dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, width), torch.nn.ReLU(), torch.nn.Linear(width, 512)).to(dev)


def wrap(model, local, fsdp):
    if not fsdp:
        return DDP(model, device_ids=[local] if local is not None else None)
    from torch.distributed.fsdp import fully_shard
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    return fully_shard(model)


def full_parameters(model):
    """The parameters as one tensor; FSDP2's DTensors are gathered first."""
    parts = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    return torch.cat([p.detach().reshape(-1) for p in parts])


def train(rank, n, local, steps, fsdp, plays, width=2048, dev="cuda"):
    """plays > 0: this one process trains on the batches of `plays` ranks at
    once (world size 1), the same global step as DDP over that many ranks:
    the one-GPU reference, since NCCL refuses two ranks on one GPU."""
    mode = "fsdp" if fsdp else "ddp"
    model = wrap(make_model(width, dev), local, fsdp)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = None
    ranks, world = ([rank], n) if plays == 0 else (range(plays), plays)
    for step in range(steps):
        xs, ys = [], []
        for r in ranks:
            g = torch.Generator(device=dev).manual_seed(1000 + step * world + r)
            xs.append(torch.randn(64, 512, device=dev, generator=g))
            ys.append(torch.randn(64, 512, device=dev, generator=g))
        out = model(torch.cat(xs))
        y = torch.cat(ys)
        loss = torch.nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            mine = torch.nn.functional.mse_loss(out[:64], y[:64])  # rank 0's own batch
            print("loss-curve %s step %d loss %.9g" % (mode, step, mine.item()), flush=True)
    flat = full_parameters(model)
    words = flat.view(torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 9973 + 1
    digest = torch.tensor([int(((words % 1000003) * weights).sum().item())], dtype=torch.int64, device=dev)
    lo, hi = digest.clone(), digest.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    expect(torch.equal(lo, hi), "%s parameters differ between ranks (digests %d .. %d)" % (mode, lo.item(), hi.item()))
    print("%s-result rank %d world %d steps %d loss %.9g checksum %d" % (mode, rank, n, steps, loss.item(),
                                                                          digest.item()), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--fsdp", action="store_true", help="train under FSDP2 (fully_shard) instead of DDP")
    p.add_argument("--backend", default="nccl", choices=("nccl", "gpubridge"))
    p.add_argument("--plays", type=int, default=0, metavar="N",
                   help="world size 1: train on the batches of N ranks at once (the one-GPU reference)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: CPU tensors (simulated islands, no GPU)")
    p.add_argument("--width", type=int, default=2048, help="the hidden layer's width")
    a = p.parse_args()
    local, dev = None, torch.device("cpu")
    if a.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    if a.backend == "gpubridge":
        import gpubridge  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.plays == 0:
        checks(rank, n, dev)
    train(rank, n, local, a.steps, a.fsdp, a.plays, a.width, dev)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
