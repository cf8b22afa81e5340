"""Train a small model with DDP over PyTorch's own "nccl" backend, with
gpubridge's drop-in serving the NCCL calls (README.md's drop-in quick start,
docs/DROP_IN.md). The script is plain PyTorch: nothing in it names gpubridge
but the check that the drop-in is loaded.

    LD_PRELOAD=$(python -c "import gpubridge; print(gpubridge.drop_in_path())") \\
      torchrun --nproc-per-node 2 examples/drop_in_train.py

It needs what PyTorch's nccl backend needs: a CUDA build of torch (with NCCL)
and one GPU per rank (or, for a test on one GPU, GPUBRIDGE_SPLIT_TEST=half
with two ranks sharing it, docs/DROP_IN.md). A CPU build of torch has no nccl
backend; on a machine without GPUs, run a C program written for NCCL over the
drop-in instead: examples/c/nccl_allreduce.c (README.md).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def preloaded():
    """Whether libgpubridge-nccl.so is mapped into this process."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        return "libgpubridge-nccl.so" in f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    if not dist.is_nccl_available() or not torch.cuda.is_available():
        sys.exit("drop_in_train.py needs a CUDA build of torch with NCCL and a GPU (torch %s: nccl %s, CUDA %s). "
                 "Without GPUs, run examples/c/nccl_allreduce.c over the drop-in (README.md, drop-in quick start)"
                 % (torch.__version__, "yes" if dist.is_nccl_available() else "no",
                    "yes" if torch.cuda.is_available() else "no"))
    if not preloaded():
        sys.exit("libgpubridge-nccl.so is not loaded, so the nccl backend would run NVIDIA's NCCL: start with "
                 "LD_PRELOAD=$(python -c \"import gpubridge; print(gpubridge.drop_in_path())\") torchrun ...")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl", device_id=device)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    ddp = DDP(model, device_ids=[device.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    target = torch.randn(32, 1, generator=torch.Generator().manual_seed(1)).to(device)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for step in range(args.steps):
        x = torch.randn(args.batch, 32, generator=gen).to(device)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), x @ target)
        loss.backward()
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print("step %3d  loss %.4f" % (step, avg.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
