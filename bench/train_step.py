#!/usr/bin/env python3
"""make bench-train: what one DDP training step costs bridged. Two ranks,
one per island (bench/islands.py: simulated NVIDIA + AMD on the CPU; on one
NVIDIA GPU split-test or NVIDIA + emulated AMD), train a stack of Linear
layers (--params, 134M on a GPU: 8 x Linear(4096, 4096); 16M on the CPU) under
DDP over the torch backend "gpubridge", each rank one batch
(bench/train_step_rank.py). Measured in one run:

  bridged   the step's time under DDP (the median step, the slowest rank's);
  alone     the same forward, backward and optimizer step in one process
            without communication;
  bytes     what the bridge carried per step: the bytes rank 0 sent in the
            host groups world, bridge and rail (gpubridge.counters()), beside
            the gradient bytes DDP all-reduces (every gradient once a step);
            with --backend nccl the counters are not reachable from torch, so
            the gradient bytes stand in (said so in the output);
  bound     the time those bytes take at the pinned device-to-host
            bandwidth measured here (bench/pinned_copy_torch.py, 256 MiB): a
            floor for the step's communication (bridged - alone) where the
            bridge runs through host memory; n/a on the CPU.

--backend nccl runs the same job with backend "nccl" over the drop-in
(LD_PRELOAD=gpubridge.drop_in_path(); GPU only). --json OUT keeps the
results. The last line is
  train_step_ms <bridged> compute_ms <alone> bridge_bytes <n> bound_ms <b|n/a>"""
import argparse
import json
import os
import subprocess
import sys

import islands
from ranks import run_ranks

HERE = os.path.dirname(os.path.abspath(__file__))
RANK = os.path.join(HERE, "train_step_rank.py")


def count_arg(text):
    """'134M' -> 134000000 (parameters: 1000-based K/M/G)."""
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    t = text.strip().upper()
    return float(t[:-1]) * units[t[-1]] if t[-1] in units else float(t)


def one_json(cmd, env, timeout):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not rows:
        raise SystemExit("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return rows[-1]


def pinned_d2h(env, timeout):
    """GB/s of pinned device-to-host copies (256 MiB), from bench/pinned_copy_torch.py."""
    cmd = [sys.executable, os.path.join(HERE, "pinned_copy_torch.py"), "-s", "256"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    words = p.stdout.split()
    if p.returncode != 0 or "d2h" not in words:
        raise SystemExit("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    print(p.stdout.strip(), flush=True)
    return float(words[words.index("d2h") + 1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda where torch sees a GPU, else cpu")
    p.add_argument("--layout", choices=islands.LAYOUTS, help="default: split on cuda, simulated on cpu")
    p.add_argument("--backend", default="gpubridge", choices=("gpubridge", "nccl"),
                   help="nccl: torch's NCCL backend over the drop-in (GPU only)")
    p.add_argument("--params", type=count_arg, help="target parameter count (default 134M on cuda, 16M on cpu)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, help="rows per rank (default 64 on cuda, 32 on cpu)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=25, help="DDP's bucket_cap_mb (25)")
    p.add_argument("--compression", default="off",
                   help="GPUBRIDGE_BRIDGE_COMPRESSION of the bridged run: off, bf16, fp8, or a comma list run in "
                        "turn (the last line then gains <wire>_speedup, off's step over each)")
    p.add_argument("--json", metavar="OUT", help="write the results here")
    p.add_argument("--timeout", type=float, default=600, help="seconds for each part")
    a = p.parse_args()
    a.device = a.device or ("cuda" if islands.has_cuda() else "cpu")
    cuda = a.device == "cuda"
    a.layout = a.layout or ("split" if cuda else "simulated")
    if cuda == (a.layout == "simulated"):
        raise SystemExit("--layout %s needs --device %s" % (a.layout, "cpu" if a.layout == "simulated" else "cuda"))
    if a.backend == "nccl" and not cuda:
        raise SystemExit("--backend nccl runs torch's NCCL backend over the drop-in: it needs a GPU (--device cuda)")
    a.params = a.params or (134e6 if cuda else 16e6)
    a.batch = a.batch or (64 if cuda else 32)
    threads = None if cuda else max(1, (os.cpu_count() or 2) // 2)  # each rank's share of the cores, and alone's
    env, prefix = islands.job(a.build, a.layout, threads)
    common = ["--params", str(a.params), "--layers", str(a.layers), "--batch", str(a.batch), "--steps", str(a.steps),
              "--warmup", str(a.warmup), "--device", a.device]

    print("bench-train: alone: 1 process, %s, no communication" % a.device, flush=True)
    alone = one_json([sys.executable, RANK, "--alone"] + common, env, a.timeout)
    print("bench-train: bridged: 2 ranks (%s), DDP over backend %s, bucket_cap_mb %g" % (
        a.layout, a.backend + (" (drop-in)" if a.backend == "nccl" else ""), a.bucket_mb), flush=True)
    if a.backend == "nccl":
        env["LD_PRELOAD"] = " ".join([islands.drop_in(a.build)] + [x for x in [env.get("LD_PRELOAD")] if x])
    wires = a.compression.split(",")
    by_wire = {}
    for w in wires:
        rows = run_ranks(prefix + [sys.executable, RANK, "--backend", a.backend, "--bucket-mb", str(a.bucket_mb)] +
                         common, 2, dict(env, GPUBRIDGE_BRIDGE_COMPRESSION=w), a.timeout)
        if not rows:
            raise SystemExit("rank 0 printed no result")
        by_wire[w] = rows[-1]
    bridged = by_wire[wires[0]]
    if a.backend == "nccl":
        env.pop("LD_PRELOAD")
    d2h = pinned_d2h(env, a.timeout) if cuda else None

    counted = "bridge_bytes" in bridged
    nbytes = bridged["bridge_bytes"] if counted else bridged["grad_bytes"]
    bound = nbytes / (d2h * 1e9) * 1e3 if d2h else None
    print("model: %d x Linear(%d, %d), %d fp32 parameters, %d gradient bytes; batch %d rows per rank; %d steps "
          "after %d warm-up" % (a.layers, bridged["width"], bridged["width"], bridged["params"], bridged["grad_bytes"],
                                a.batch, a.steps, a.warmup))
    print("  %-40s %10s %10s %10s" % ("", "median ms", "mean ms", "min ms"))
    named = [("bridged (%s, %s%s)" % (a.layout, a.backend, ", compression " + w if len(wires) > 1 or w != "off" else
                                    ""), r) for w, r in by_wire.items()]
    for name, r in named + [("alone (no communication)", alone)]:
        print("  %-40s %10.2f %10.2f %10.2f" % (name, r["step_ms"], r["mean_ms"], r["min_ms"]))
        if "bridge_bytes" in r and r is not alone:
            print("  %-40s %10d bytes a step" % ("", r["bridge_bytes"]))
    if counted:
        print("bridge bytes per step: %d (rank 0 sent, gpubridge.counters(): world + bridge + rail), %.1f all-reduce "
              "calls a step; DDP's gradients: %d" % (nbytes, bridged["calls"], bridged["grad_bytes"]))
        print("topology: %s" % bridged.get("topology"))
    else:
        print("bridge bytes per step: %d, computed from the parameters (DDP all-reduces every gradient once a step; "
              "the drop-in's counters are not reachable from torch)" % nbytes)
    print("bound: %s" % ("%.2f ms = those bytes at %.1f GB/s pinned d2h" % (bound, d2h) if bound else
                         "n/a (no GPU: no pinned copy to measure)"))
    print("communication's share of the step: %.2f ms of %.2f ms" % (bridged["step_ms"] - alone["step_ms"],
                                                                     bridged["step_ms"]))
    line = "train_step_ms %.3f compute_ms %.3f bridge_bytes %d bound_ms %s" % (
        bridged["step_ms"], alone["step_ms"], nbytes, "%.3f" % bound if bound else "n/a")
    if "off" in by_wire:
        line += "".join(" %s_speedup %.2f" % (w, by_wire["off"]["step_ms"] / r["step_ms"])
                        for w, r in by_wire.items() if w != "off")
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"layout": a.layout, "backend": a.backend, "device": a.device, "bucket_mb": a.bucket_mb,
                       "bridged": bridged, "by_compression": by_wire, "alone": alone, "bridge_bytes": nbytes,
                       "bytes_counted": counted,
                       "pinned_d2h_gbps": d2h, "bound_ms": bound, "result": line}, f, indent=1, sort_keys=True)
            f.write("\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
