#!/usr/bin/env python3
"""make bench-compress: bridge compression across an emulated 10 Gbit/s link.
Two network namespaces joined by a veth pair shaped by tc (bench/netns.py)
stand for two hosts, one simulated island on each (rank 0 nvidia on host a,
rank 1 amd on host b), so the bridge crosses the link (remote slots over
TCP). In one run, --repeat times in turn: gpubridge-perf all_reduce fp32,
16 MiB .. 256 MiB, uncompressed, with GPUBRIDGE_BRIDGE_COMPRESSION=bf16 and
with fp8 (each checked: -c 1; the best time per size is kept). Writes
OUT/compress_allreduce.json; the last line is
`bf16_speedup_256MiB <x> fp8_speedup_256MiB <y>`: the uncompressed 256 MiB
time (in place) over each compressed one. Needs root (namespaces, tc)."""
import argparse
import os

from netns import Link, check_tools, run_pair
from perfjob import perf_args, series, size_arg
from report import best, human, machine, save

WIRES = ("off", "bf16", "fp8")
MIB256 = 256 << 20

p = argparse.ArgumentParser()
p.add_argument("--build", default="build")
p.add_argument("--out", help="where results go (default: BUILD/perf)")
p.add_argument("--gbit", type=float, default=10)
p.add_argument("-b", type=size_arg, default=16 << 20)
p.add_argument("-e", type=size_arg, default=MIB256)
p.add_argument("-f", type=int, default=4)
p.add_argument("-n", type=int, default=3)
p.add_argument("-w", type=int, default=1)
p.add_argument("--repeat", type=int, default=2)
a = p.parse_args()
a.out = a.out or os.path.join(a.build, "perf")
os.makedirs(a.out, exist_ok=True)
before = machine()
check_tools()

link = Link("gbc%d" % (os.getpid() % 100000))
runs = {w: [] for w in WIRES}
meta = {}
try:
    link.up()
    link.shape(a.gbit, 0)
    for _ in range(a.repeat):
        for w in WIRES:
            meta[w], rows, _out = run_pair(link, a.build, perf_args("all_reduce", a.b, a.e, a.f, a.n, a.w), 600,
                                           {"GPUBRIDGE_BRIDGE_COMPRESSION": w})
            runs[w].append(series(rows, "in_place"))
finally:
    link.down()

result = {w: best(runs[w], 1.0) for w in WIRES}
for size in sorted(result["off"]):
    print("bench-compress: %s: %s" % (human(size), ", ".join(
        "%s %.1f ms (%.3f GB/s)" % (w, result[w][size]["time_us"] / 1e3, result[w][size]["algbw_gbps"])
        for w in WIRES)), flush=True)
save(os.path.join(a.out, "compress_allreduce.json"),
     {"what": "fp32 all-reduce sum in place, 2 ranks on 2 emulated hosts (netns + veth + tc at %g Gbit/s), one "
              "simulated island each; GPUBRIDGE_BRIDGE_COMPRESSION off, bf16, fp8" % a.gbit,
      "iters": a.n, "warmup": a.w, "repeat": a.repeat, "machine_before": before, "machine_after": machine(),
      "meta": meta, "series": {w: {str(k): v for k, v in sorted(s.items())} for w, s in result.items()}})
if MIB256 not in result["off"]:
    raise SystemExit("bench-compress: no 256 MiB result (run with -e 256M)")
off = result["off"][MIB256]["time_us"]
print("bf16_speedup_256MiB %.2f fp8_speedup_256MiB %.2f" % (off / result["bf16"][MIB256]["time_us"],
                                                          off / result["fp8"][MIB256]["time_us"]))
