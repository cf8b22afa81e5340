"""Two GPU islands on a laptop: 4 processes, 2 simulated NVIDIA and 2
simulated AMD ranks, train a tiny model with DDP over gpubridge and print the
loss. No GPU needed:

    python examples/simulated_two_islands.py [--steps 30]

Each process sets GPUBRIDGE_VENDOR before gpubridge makes its communicator;
the library then runs the same schedule it runs on GPUs (island steps, the
host bridge between the islands' leaders) with host memory as device memory.
"""
import argparse
import os
import sys

import local_job

VENDORS = ["nvidia", "nvidia", "amd", "amd"]


def rank_main(rank, port, steps):
    os.environ.update(GPUBRIDGE_VENDOR=VENDORS[rank], OMP_NUM_THREADS="1")
    os.environ.setdefault("GPUBRIDGE_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gpubridge

    dist.init_process_group("gpubridge", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=len(VENDORS))
    if rank == 0:
        t = gpubridge.get_topology()
        print("islands: %s, sizes %s, leaders %s, policy %s" % (
            t["island_vendor"], t["island_size"], t["leader_of_island"], t["policy"]), flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    w = torch.randn(16, 1, generator=torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(steps):
        x = torch.randn(16, 16, generator=gen)
        loss = nn.functional.mse_loss(ddp(x), torch.tanh(x @ w))
        opt.zero_grad()
        loss.backward()
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 5 == 0 or step == steps - 1):
            print("step %3d  mean loss over the 4 ranks %.5f" % (step, avg.item()), flush=True)
    # Every rank holds the same bits: compare a checksum of the weights.
    s = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().sum().reshape(1)
    sums = torch.empty(len(VENDORS), dtype=torch.float64)
    getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(sums, s)  # renamed in torch 2.13
    if rank == 0:
        print("weight checksums per rank: %s (%s)" % (
            sums.tolist(), "identical" if bool((sums == sums[0]).all()) else "DIFFERENT"), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=300, help="seconds before the job is stopped")
    args = ap.parse_args()
    return local_job.run_ranks(rank_main, len(VENDORS), (args.steps,), args.timeout)

if __name__ == "__main__":
    sys.exit(main())
