#!/usr/bin/env python3
"""What the flight recorder costs: the 8-byte all-reduce of a 2-rank job
(nvidia,amd, simulated) with GPUBRIDGE_TRACE_BUFFER=0 (off) and at its
default (on), in alternated runs, and the median of the per-pair ratios.

    python3 bench/trace_overhead.py [--build build] [--pairs 7] [--iters 5000]
                                    [--warmup 500] [--out FILE]

Each run is `gpubridge-perf all_reduce -b 8 -e 8 -n ITERS -w WARMUP -c 0`
(rank 0's host clock, mean over ranks). Runs alternate off, on, off, on, ...
so slow drifts of a shared machine hit both alike; pair k's ratio is
on_k / off_k. Prints one line per run and then
`trace_overhead_8B median_ratio <r> overhead_pct <p> off_us <a> on_us <b>`;
writes the runs and the summary as JSON to --out (default
BUILD/perf/trace_overhead.json, never into docs/ unless asked)."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfjob  # noqa: E402


def one_run(build, buffer, iters, warmup):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBRIDGE_")}
    env["GPUBRIDGE_TRACE_BUFFER"] = str(buffer)
    args = perfjob.perf_args("all_reduce", 8, 8, 2, iters, warmup, check=0)
    _, rows, _ = perfjob.run_local(build, 2, "nvidia,amd", args, env=env)
    s = perfjob.series(rows, "out_of_place")
    if 8 not in s:
        raise SystemExit("gpubridge-perf gave no 8-byte row: %s" % rows)
    return s[8]["time_us"]


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(here, "build"))
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--buffer", type=int, default=2048, help="GPUBRIDGE_TRACE_BUFFER of the 'on' runs")
    ap.add_argument("--out", default=None, help="JSON result (default BUILD/perf/trace_overhead.json)")
    a = ap.parse_args()
    out = a.out or os.path.join(a.build, "perf", "trace_overhead.json")
    runs = []
    for k in range(a.pairs):
        off = one_run(a.build, 0, a.iters, a.warmup)
        on = one_run(a.build, a.buffer, a.iters, a.warmup)
        runs.append({"off_us": off, "on_us": on, "ratio": on / off})
        print("pair %d: off %.2f us, on %.2f us, ratio %.4f" % (k + 1, off, on, on / off), flush=True)
    ratio = statistics.median(r["ratio"] for r in runs)
    off_us = statistics.median(r["off_us"] for r in runs)
    on_us = statistics.median(r["on_us"] for r in runs)
    summary = {"median_ratio": ratio, "overhead_pct": (ratio - 1) * 100, "off_us": off_us, "on_us": on_us,
               "pairs": a.pairs, "iters": a.iters, "warmup": a.warmup, "buffer": a.buffer}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"summary": summary, "runs": runs}, f, indent=1)
    print("trace_overhead_8B median_ratio %.4f overhead_pct %.2f off_us %.2f on_us %.2f" %
          (ratio, summary["overhead_pct"], off_us, on_us))


if __name__ == "__main__":
    main()
