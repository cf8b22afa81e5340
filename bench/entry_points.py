#!/usr/bin/env python3
"""make bench-entry: one fp32 all-reduce (sum, in place) through gpubridge's
three entry points side by side, on the same two ranks (bench/islands.py:
simulated NVIDIA + AMD on the CPU; on one NVIDIA GPU split-test or NVIDIA +
emulated AMD), at 1 MiB, 25 MiB and 256 MiB (--sizes):

  perf    gpubridge-perf, the C API (its -J file's in-place column:
          device events on a GPU, the host clock when simulated);
  torch   the torch backend "gpubridge" from an outside torch client
          (bench/torch_allreduce_rank.py: CUDA events on a GPU, the wall
          clock around work.wait() on the CPU);
  dropin  torch's backend "nccl" over the drop-in libgpubridge-nccl.so
          (LD_PRELOAD=gpubridge.drop_in_path()); GPU only, skipped on the CPU.

Each times -n calls after -w warm-up calls and one checked call, averaged
over the ranks; --repeat R runs each R times, alternating, and keeps each
size's best. Prints a table (time, algbw, and the ratio gpubridge-perf time
over the entry point's: 1.0 = no cost over the C API) and, with --json OUT,
keeps the results. The last line is
  entry_ratio_torch_256MiB <x> entry_ratio_dropin_256MiB <y>   (n/a: not run)"""
import argparse
import json
import os
import sys

import islands
from perfjob import perf_args, series, size_arg
from ranks import rows_to_series, run_ranks
from report import best, human, machine

HERE = os.path.dirname(os.path.abspath(__file__))
RANK = os.path.join(HERE, "torch_allreduce_rank.py")
MIB256 = 256 << 20


def perf_series(a, sizes):
    out = {}
    for s in sizes:
        _, rows = islands.run_perf(a.build, a.layout, perf_args("all_reduce", s, s, 2, a.n, a.w), a.timeout)
        out.update(series(rows, "in_place"))
    return out


def torch_series(a, backend, env, prefix):
    cmd = prefix + [sys.executable, RANK, "--backend", backend, "--device", a.device, "--sizes", a.sizes,
                    "-n", str(a.n), "-w", str(a.w)]
    return rows_to_series(run_ranks(cmd, 2, env, a.timeout))


def cell(v, base):
    if v is None:
        return "%10s %8s %7s" % ("-", "-", "-")
    ratio = " %7.3f" % (base["time_us"] / v["time_us"]) if base else ""
    return "%10.1f %8.3f%s" % (v["time_us"], v["algbw_gbps"], ratio)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda where torch sees a GPU, else cpu")
    p.add_argument("--layout", choices=islands.LAYOUTS, help="default: split on cuda, simulated on cpu")
    p.add_argument("--sizes", default="1M,25M,256M", help="bytes, comma-separated (1024-based K/M/G)")
    p.add_argument("-n", type=int, default=10, help="timed calls per size (at least 5)")
    p.add_argument("-w", type=int, default=3, help="warm-up calls per size")
    p.add_argument("--repeat", type=int, default=3, help="runs of each entry point, alternating (3)")
    p.add_argument("--json", metavar="OUT", help="write the results here")
    p.add_argument("--timeout", type=float, default=600, help="seconds for each run")
    a = p.parse_args()
    if a.n < 5:
        raise SystemExit("-n %d: time at least 5 calls" % a.n)
    a.device = a.device or ("cuda" if islands.has_cuda() else "cpu")
    cuda = a.device == "cuda"
    a.layout = a.layout or ("split" if cuda else "simulated")
    if cuda == (a.layout == "simulated"):
        raise SystemExit("--layout %s needs --device %s" % (a.layout, "cpu" if a.layout == "simulated" else "cuda"))
    sizes = [size_arg(s) for s in a.sizes.split(",")]
    env, prefix = islands.job(a.build, a.layout)
    dropin_env = dict(env, LD_PRELOAD=islands.drop_in(a.build)) if cuda else None
    before = machine()

    runs = {"perf": [], "torch": [], "dropin": []}
    for k in range(a.repeat):
        tag = "bench-entry: run %d of %d, 2 ranks (%s):" % (k + 1, a.repeat, a.layout)
        print(tag, "gpubridge-perf", flush=True)
        runs["perf"].append(perf_series(a, sizes))
        print(tag, "torch backend gpubridge", flush=True)
        runs["torch"].append(torch_series(a, "gpubridge", env, prefix))
        if cuda:
            print(tag, "torch backend nccl over the drop-in", flush=True)
            runs["dropin"].append(torch_series(a, "nccl", dropin_env, prefix))
    if not cuda:
        print("bench-entry: dropin skipped: torch's backend nccl needs a GPU (this torch %s)" % (
            "has no CUDA device" if not islands.has_cuda() else "was asked for --device cpu"))
    res = {name: best(r, 1.0) if r else {} for name, r in runs.items()}  # 2 ranks: busbw = algbw

    print("fp32 all-reduce, sum, in place, 2 ranks (%s, %s); mean of %d calls after %d warm-up, best of %d; "
          "ratio = gpubridge-perf time / entry point's" % (a.layout, a.device, a.n, a.w, a.repeat))
    print("%10s | %10s %8s | %10s %8s %7s | %10s %8s %7s" % ("size", "perf us", "GB/s", "torch us", "GB/s", "ratio",
                                                          "dropin us", "GB/s", "ratio"))
    for s in sizes:
        base = res["perf"].get(s)
        print("%10s | %s | %s | %s" % (human(s), cell(base, None), cell(res["torch"].get(s), base),
                                       cell(res["dropin"].get(s), base)))

    def ratio(name):
        v, base = res[name].get(MIB256), res["perf"].get(MIB256)
        return "%.3f" % (base["time_us"] / v["time_us"]) if v and base else "n/a"

    line = "entry_ratio_torch_256MiB %s entry_ratio_dropin_256MiB %s" % (ratio("torch"), ratio("dropin"))
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"what": "fp32 all-reduce sum in place, 2 ranks, three entry points", "layout": a.layout,
                       "device": a.device, "iters": a.n, "warmup": a.w, "repeat": a.repeat,
                       "machine_before": before, "machine_after": machine(),
                       "series": {name: {str(s): v for s, v in sorted(r.items())} for name, r in res.items()},
                       "result": line}, f, indent=1, sort_keys=True)
            f.write("\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
