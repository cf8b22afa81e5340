#!/usr/bin/env python3
"""make bench-gloo: gpubridge (2 ranks in 2 simulated islands, nvidia + amd)
against torch.distributed's gloo (2 processes on the CPU), fp32 all-reduce
(sum, in place) 8 B .. 64 MiB, on this machine, in one run. Each side runs
--repeat times, alternating, and keeps its best time per size. Writes
OUT/gloo_allreduce.{json,png}; the last line is
`algbw_ratio_64MiB <x> latency_ratio_8B <y>` (gpubridge over gloo)."""
import argparse
import os
import sys

from perfjob import perf_args, run_local, series, size_arg
from plot import plot_busbw
from ranks import rows_to_series, run_ranks
from report import best, final_line, machine, markdown, save

HERE = os.path.dirname(os.path.abspath(__file__))

p = argparse.ArgumentParser()
p.add_argument("--build", default="build")
p.add_argument("--out", help="where results go (default: BUILD/perf)")
p.add_argument("-b", type=size_arg, default=8)
p.add_argument("-e", type=size_arg, default=64 << 20)
p.add_argument("-n", type=int, default=20)
p.add_argument("-w", type=int, default=5)
p.add_argument("--repeat", type=int, default=3)
a = p.parse_args()
a.out = a.out or os.path.join(a.build, "perf")
os.makedirs(a.out, exist_ok=True)
before = machine()

gb_runs, gloo_runs, meta = [], [], {}
for k in range(a.repeat):
    print("bench-gloo: run %d of %d: gpubridge-perf, 2 ranks, nvidia:1,amd:1 (simulated)" % (k + 1, a.repeat),
          flush=True)
    meta, rows, _ = run_local(a.build, 2, "nvidia:1,amd:1", perf_args("all_reduce", a.b, a.e, 2, a.n, a.w))
    gb_runs.append(series(rows, "in_place"))
    print("bench-gloo: run %d of %d: torch.distributed gloo, 2 processes" % (k + 1, a.repeat), flush=True)
    rows = run_ranks([sys.executable, os.path.join(HERE, "gloo_allreduce.py"), "-b", str(a.b), "-e", str(a.e),
                      "-n", str(a.n), "-w", str(a.w)], 2, {"GLOO_SOCKET_IFNAME": "lo"})
    gloo_runs.append(rows_to_series(rows))

gb, gloo = best(gb_runs, 1.0), best(gloo_runs, 1.0)  # 2 ranks: busbw = algbw
import torch  # noqa: E402  (only for its version)

print(markdown(["gpubridge", "gloo"], [gb, gloo]))
save(os.path.join(a.out, "gloo_allreduce.json"),
     {"what": "fp32 all-reduce sum in place, 2 ranks; gpubridge simulated (nvidia:1,amd:1) vs torch gloo on CPU",
      "iters": a.n, "warmup": a.w, "repeat": a.repeat,
      "machine_before": before, "machine_after": machine(), "torch": torch.__version__, "gpubridge_meta": meta,
      "gpubridge": {str(s): v for s, v in sorted(gb.items())}, "gloo": {str(s): v for s, v in sorted(gloo.items())},
      "result": final_line(gb, gloo)})
plot_busbw(os.path.join(a.out, "gloo_allreduce.png"),
           "fp32 all-reduce, 2 ranks: gpubridge (2 simulated islands) vs gloo",
           {"gpubridge (simulated, nvidia + amd)": gb, "torch %s gloo (CPU)" % torch.__version__: gloo},
           "simulated on a %d-core machine; best of %d runs; busbw = algbw for 2 ranks" % (os.cpu_count(), a.repeat))
print(final_line(gb, gloo))
