#!/usr/bin/env python3
"""The hardware line the bridge is held to: pinned device-to-host and
host-to-device copy bandwidth of one GPU, through torch. Prints
`pinned d2h <GB/s> h2d <GB/s>` for a 256 MiB buffer (override with -s MiB)."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("-s", type=int, default=256, help="MiB")
p.add_argument("-n", type=int, default=20)
a = p.parse_args()
dev = torch.empty(a.s << 18, dtype=torch.float32, device="cuda")
host = torch.empty(a.s << 18, dtype=torch.float32, pin_memory=True)


def bw(copy):
    for _ in range(3):
        copy()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.n):
        copy()
    torch.cuda.synchronize()
    return (a.s << 20) * a.n / (time.perf_counter() - t0) / 1e9


d2h = bw(lambda: host.copy_(dev, non_blocking=True))
h2d = bw(lambda: dev.copy_(host, non_blocking=True))
print(f"pinned {a.s} MiB d2h {d2h:.1f} GB/s h2d {h2d:.1f} GB/s")
