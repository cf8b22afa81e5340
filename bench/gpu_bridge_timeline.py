#!/usr/bin/env python3
"""Where a bridged all-reduce's time goes on a GPU, from CUDA's own activity
trace (a GPU diagnostic; nsys need not be installed: torch.profiler reads
the same CUPTI records). One rank of a torchrun job with the backend
"gpubridge" (one GPU: GPUBRIDGE_SPLIT_TEST=half); for each size, after 3
warm-up calls, -n in-place fp32 all-reduces by gbAllReduce (through ctypes,
on the current stream) are traced on every rank and written to
OUT/trace_<bytes>_r<rank>.json. Rank 0 then reads every rank's trace and
prints, per size: each copy direction's busy time (the union of its copies,
all ranks), the time both directions were busy, the bytes over the busy
time, and the direction's idle gaps of more than --gap us (start, length,
from the first copy), then the last --last operations (start, length,
rank, kind, bytes).

  GPUBRIDGE_SPLIT_TEST=half torchrun --standalone --nproc_per_node 2 \\
      bench/gpu_bridge_timeline.py --sizes 16M,256M --out /tmp/timeline
(PYTHONPATH=python:bench and GPUBRIDGE_LIBRARY=build-gpu/lib/libgpubridge.so
where gpubridge is not installed.)"""
import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

import gpubridge
from gpubridge import _lib
from perfjob import size_arg


def trace_path(out, size, rank):
    return os.path.join(out, "trace_%d_r%d.json" % (size, rank))


def copies_and_kernels(out, size, ranks):
    """(start, end, rank, name, bytes) of every copy and kernel, in us, sorted."""
    ops = []
    for r in range(ranks):
        with open(trace_path(out, size, r)) as f:
            events = json.load(f)["traceEvents"]
        for e in events:
            if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "kernel"):
                ops.append((e["ts"], e["ts"] + e["dur"], r, e["name"], e.get("args", {}).get("bytes", 0)))
    return sorted(ops)


def union(spans):
    """The spans merged: [(start, end)], sorted, none overlapping."""
    merged = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def overlap(x, y):
    """Time covered by both of two merged span lists."""
    total, i, j = 0.0, 0, 0
    while i < len(x) and j < len(y):
        total += max(0.0, min(x[i][1], y[j][1]) - max(x[i][0], y[j][0]))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


def report(out, size, ranks, gap, last):
    ops = copies_and_kernels(out, size, ranks)
    if not ops:
        print("%d B: no copies or kernels in the traces" % size)
        return
    t0 = ops[0][0]
    ways = {"DtoH": [o for o in ops if "DtoH" in o[3]], "HtoD": [o for o in ops if "HtoD" in o[3]]}
    busy = {w: union([(o[0], o[1]) for o in L]) for w, L in ways.items()}
    window = max(o[1] for o in ops) - t0
    print("%d B: %d operations over %.0f us (%d ranks), both ways busy %.0f us" % (
        size, len(ops), window, ranks, overlap(busy["DtoH"], busy["HtoD"])))
    for w, spans in busy.items():
        t = sum(b - a for a, b in spans)
        moved = sum(o[4] for o in ways[w])
        idle = [(spans[k][1] - t0, spans[k + 1][0] - spans[k][1]) for k in range(len(spans) - 1)
                if spans[k + 1][0] - spans[k][1] > gap]
        print("  %s: busy %.0f us (%.0f%%), %.1f GB/s while busy; idle > %g us: %s" % (
            w, t, 100.0 * t / window, moved / t / 1e3 if t else 0.0, gap,
            ", ".join("%.0f+%.0f" % i for i in idle) or "none"))
    for a, b, r, name, nbytes in ops[-last:]:
        print("  %9.1f %8.1f r%d %-28s %s" % (a - t0, b - a, r, name[:28], nbytes or ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="16M,256M", help="bytes, comma-separated (1024-based K/M/G)")
    p.add_argument("-n", type=int, default=4, help="traced calls per size")
    p.add_argument("--out", required=True, help="directory for the traces")
    p.add_argument("--gap", type=float, default=100.0, help="idle gaps longer than this are listed (us)")
    p.add_argument("--last", type=int, default=40, help="operations listed at the end")
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_bridge_timeline.py needs a CUDA GPU (torch sees none)")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group("gpubridge")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    handle = gpubridge.api._resolve(None, "gpu_bridge_timeline").handle
    os.makedirs(a.out, exist_ok=True)
    sizes = [max(1, size_arg(s) // 4) * 4 for s in a.sizes.split(",")]  # whole fp32 elements
    for size in sizes:
        x = torch.ones(size // 4, device="cuda")

        def call():
            _lib.all_reduce(x.data_ptr(), x.data_ptr(), x.numel(), _lib.FLOAT32, _lib.SUM, handle,
                            torch.cuda.current_stream().cuda_stream)
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        dist.barrier()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.n):
                call()
            torch.cuda.synchronize()
        prof.export_chrome_trace(trace_path(a.out, size, rank))
    dist.barrier()
    if rank == 0:
        for size in sizes:
            report(a.out, size, ranks, a.gap, a.last)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
