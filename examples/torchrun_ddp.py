"""Train a small model with DDP over gpubridge, started by torchrun.

Real GPUs, one process per GPU, NVIDIA and AMD nodes in one job:
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 examples/torchrun_ddp.py

Simulated on one machine (no GPU), ranks 0-1 as NVIDIA and 2-3 as AMD:
    torchrun --nproc-per-node 4 examples/torchrun_ddp.py --simulate nvidia:2,amd:2
(the same as GPUBRIDGE_VENDORS=nvidia:2,amd:2 torchrun --nproc-per-node 4 examples/torchrun_ddp.py)

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
init_process_group(backend="gpubridge") reads them (env://) and rank 0
shares gpubridge's unique id through torchrun's store.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulate", metavar="VENDORS", help="simulate GPUs on the host, e.g. nvidia:2,amd:2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    if args.simulate:
        # Read by the library when the first communicator is made: each rank
        # takes the entry at its RANK.
        os.environ["GPUBRIDGE_VENDORS"] = args.simulate
        os.environ.setdefault("GPUBRIDGE_SOCKET_IFNAME", "lo")

    import gpubridge  # registers the "gpubridge" backend

    dist.init_process_group(backend="gpubridge")
    world = dist.get_world_size()
    if args.simulate or not torch.cuda.is_available():
        device = torch.device("cpu")  # simulated ranks: device memory is host memory
    else:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    topo = gpubridge.get_topology()
    if rank == 0:
        print("gpubridge %s: %d ranks, islands %s of sizes %s, policy %s" % (
            topo["run_kind"], world, topo["island_vendor"], topo["island_size"], topo["policy"]), flush=True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    target = torch.randn(32, 1, generator=torch.Generator().manual_seed(1)).to(device)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for step in range(args.steps):
        x = torch.randn(args.batch, 32, generator=gen).to(device)
        y = x @ target
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print("step %3d  loss %.4f" % (step, avg.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
