#!/usr/bin/env python3
"""Where a torch client's all-reduce spends its time, one layer at a time
(a GPU diagnostic beside make bench-entry). One rank of a torchrun job with
the backend "gpubridge" (one GPU: GPUBRIDGE_SPLIT_TEST=half); for each size
and layer, after 3 warm-up calls, --bursts bursts of -n calls back to back,
each burst timed with CUDA events on the current stream and with the host
clock until the last call returned (host-enqueue):

  dist     dist.all_reduce(x), synchronous (the torch backend);
  current  gbAllReduce through ctypes on the current stream (no Python
           layer of the backend);
  hop      the same on a stream of its own that waits for the current
           stream through an event, and the current stream waits for it
           after (the hop an asynchronous call makes).

Rank 0 prints one line a burst:
  <size> <layer> burst <b>: gpu <us> us/call host-enqueue <us> host-total <us>

  GPUBRIDGE_SPLIT_TEST=half torchrun --standalone --nproc_per_node 2 \\
      bench/entry_layers.py --sizes 1M,25M --layers dist,current,hop
(PYTHONPATH=python and GPUBRIDGE_LIBRARY=build-gpu/lib/libgpubridge.so
where gpubridge is not installed.)"""
import argparse
import os
import time

import torch
import torch.distributed as dist

import gpubridge
from gpubridge import _lib
from perfjob import size_arg


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1M,25M", help="bytes, comma-separated (1024-based K/M/G)")
    p.add_argument("--layers", default="dist,current,hop", help="comma-separated: dist, current, hop")
    p.add_argument("-n", type=int, default=10, help="calls a burst")
    p.add_argument("--bursts", type=int, default=4)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("entry_layers.py needs a CUDA GPU (torch sees none)")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group("gpubridge")
    rank = dist.get_rank()
    handle = gpubridge.api._resolve(None, "entry_layers").handle
    side = torch.cuda.Stream()
    into, back = torch.cuda.Event(), torch.cuda.Event()

    def lib_call(x, stream):
        _lib.all_reduce(x.data_ptr(), x.data_ptr(), x.numel(), _lib.FLOAT32, _lib.SUM, handle, stream)

    def hop(x):
        cur = torch.cuda.current_stream()
        into.record(cur)
        side.wait_event(into)
        lib_call(x, side.cuda_stream)
        back.record(side)
        cur.wait_event(back)

    layers = {"dist": lambda x: dist.all_reduce(x),
              "current": lambda x: lib_call(x, torch.cuda.current_stream().cuda_stream),
              "hop": hop}
    for size in [size_arg(s) for s in a.sizes.split(",")]:
        x = torch.ones(max(1, size // 4), device="cuda")
        for name in a.layers.split(","):
            call = layers[name]
            for _ in range(3):
                call(x)
            for burst in range(a.bursts):
                dist.barrier()
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                for _ in range(a.n):
                    call(x)
                t1 = time.perf_counter()
                stop.record()
                stop.synchronize()
                t2 = time.perf_counter()
                if rank == 0:
                    print("%9d %-8s burst %d: gpu %8.1f us/call host-enqueue %7.1f host-total %8.1f" % (
                        x.numel() * 4, name, burst, start.elapsed_time(stop) * 1e3 / a.n, (t1 - t0) * 1e6 / a.n,
                        (t2 - t0) * 1e6 / a.n), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
