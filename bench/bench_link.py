#!/usr/bin/env python3
"""make bench-link: gpubridge over an emulated link between two hosts. Two
network namespaces joined by a veth pair stand for two hosts; tc shapes each
direction to 10 or 25 Gbit/s, with and without 1 ms one-way delay (netem; a
kernel without netem skips those rows and says why), and for reference to
1 Gbit/s (where the link, not this machine's CPU, is the limit) and not at
all (the machine's own ceiling). One gpubridge rank runs in each namespace,
each its own simulated island (nvidia on host a, amd on host b), so every
byte of the all-reduce crosses the bridge over the link. Per link, --repeat
times: one TCP stream's goodput (the reference; the best is kept), then
gpubridge-perf all_reduce fp32 8 B .. 64 MiB (the best time per size is
kept), over each of --transports (default tcp, and ucx where UCX is
installed: GPUBRIDGE_TRANSPORT=ucx over UCX's tcp transport, the parity row;
docs/UCX.md says what it gains with RDMA instead). Writes
OUT/link_allreduce.{json,png}; the last line is
`line_rate_fraction_64MiB <x>`: busbw at 64 MiB (in place) over the 10 Gbit/s
line rate (1.25 GB/s), without delay."""
import argparse
import ctypes
import os
import subprocess
import sys

from netns import Link, check_tools, run_pair
from perfjob import perf_args, series, size_arg
from plot import plot_busbw
from report import best, human, machine, save

HERE = os.path.dirname(os.path.abspath(__file__))
# (Gbit/s, one-way delay ms); 0 Gbit/s: no shaping, this machine's own ceiling
CONFIGS = [(10, 0), (10, 1), (25, 0), (25, 1), (1, 0), (0, 0)]


def ucx_loads():
    try:
        ctypes.CDLL("libucp.so.0")
        return True
    except OSError:
        return False


def tcp_reference(link, mib):
    server = subprocess.Popen(link.exec_prefix(0) + [sys.executable, os.path.join(HERE, "tcp_stream.py"), "server",
                                                     link.addr[0], "29399"], stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "listening":
            raise SystemExit("bench-link: the TCP reference server did not start")
        subprocess.run(link.exec_prefix(1) + [sys.executable, os.path.join(HERE, "tcp_stream.py"), "client",
                                              link.addr[0], "29399", str(mib)], check=True, timeout=120)
        out, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    return float(out.split()[-1])


p = argparse.ArgumentParser()
p.add_argument("--build", default="build")
p.add_argument("--out", help="where results go (default: BUILD/perf)")
p.add_argument("-b", type=size_arg, default=8)
p.add_argument("-e", type=size_arg, default=64 << 20)
p.add_argument("-f", type=int, default=2)
p.add_argument("-n", type=int, default=5)
p.add_argument("-w", type=int, default=2)
p.add_argument("--tcp-mib", type=int, default=256)
p.add_argument("--repeat", type=int, default=2)
p.add_argument("--transports", default=None, help="comma list of tcp, ucx (default: tcp, and ucx where it loads)")
a = p.parse_args()
if a.transports is None:
    a.transports = "tcp,ucx" if ucx_loads() else "tcp"
    if a.transports == "tcp":
        print("bench-link: no UCX row: libucp.so.0 does not load here (apt-get install libucx0)", flush=True)
transports = a.transports.split(",")
a.out = a.out or os.path.join(a.build, "perf")
os.makedirs(a.out, exist_ok=True)
before = machine()
check_tools()

link = Link("gbl%d" % (os.getpid() % 100000))
results, plots = {}, {}
try:
    link.up()
    netem, why = link.netem_available()
    for gbit, delay in CONFIGS:
        name = ("%d Gbit/s" % gbit if gbit else "unshaped veth") + (", %g ms delay" % delay if delay else "")
        if delay and not netem:
            print("bench-link: %s: skipped: this kernel has no netem qdisc (tc: %s)" % (name, why), flush=True)
            results[name] = {"skipped": "no netem qdisc in this kernel: " + why}
            continue
        link.shape(gbit, delay)
        tcp, runs = 0.0, {t: [] for t in transports}
        for _ in range(a.repeat):
            tcp = max(tcp, tcp_reference(link, a.tcp_mib))
            for t in transports:
                meta, rows, out = run_pair(link, a.build, perf_args("all_reduce", a.b, a.e, a.f, a.n, a.w), 300,
                                           {"GPUBRIDGE_TRANSPORT": t})
                runs[t].append(series(rows, "in_place"))
        results[name] = {"gbit": gbit, "delay_ms": delay, "tcp_stream_gbps": tcp, "gpubridge_meta": meta}
        for t in transports:
            s = best(runs[t], 1.0)  # 2 ranks: busbw = algbw
            top = s[max(s)]
            fraction = top["busbw_gbps"] / (gbit / 8.0) if gbit else None
            print("bench-link: %s: one TCP stream %.2f Gbit/s; gpubridge over %s %s busbw %.3f GB/s%s; 8 B in %.0f us"
                  % (name, tcp, t, human(max(s)), top["busbw_gbps"],
                     " = %.3f of line rate" % fraction if gbit else "", s[min(s)]["time_us"]), flush=True)
            key = "gpubridge" if t == "tcp" else "gpubridge_" + t
            results[name][key] = {str(k): v for k, v in sorted(s.items())}
            results[name][key.replace("gpubridge", "line_rate_fraction_max_size")] = fraction
            plots["gpubridge %s, %s" % (t, name)] = s
        if "ucx" in transports and "tcp" in transports:
            u, c = results[name]["gpubridge_ucx"], results[name]["gpubridge"]
            big = max(int(k) for k in c)
            print("bench-link: %s: ucx over tcp at %s: %.2fx busbw" % (name, human(big), u[str(big)]["busbw_gbps"]
                                                                       / c[str(big)]["busbw_gbps"]), flush=True)
finally:
    link.down()

save(os.path.join(a.out, "link_allreduce.json"),
     {"what": "fp32 all-reduce sum in place, 2 ranks on 2 emulated hosts (netns + veth + tc), one simulated "
              "island each", "iters": a.n, "warmup": a.w,
     "machine_before": before, "machine_after": machine(), "configs": results})
plot_busbw(os.path.join(a.out, "link_allreduce.png"), "gpubridge all-reduce across an emulated link (2 hosts)",
           plots, "simulated ranks on a %d-core machine; link: veth + tc tbf; busbw = algbw for 2 ranks"
           % os.cpu_count())
ten = results.get("10 Gbit/s")
if not ten or 64 << 20 not in {int(k) for k in ten["gpubridge"]}:
    raise SystemExit("bench-link: no 64 MiB result on the 10 Gbit/s link (run with -e 64M)")
print("line_rate_fraction_64MiB %.3f" % (ten["gpubridge"][str(64 << 20)]["busbw_gbps"] / 1.25))
