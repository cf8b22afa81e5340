#!/usr/bin/env python3
"""make bench-mpi: gpubridge (2 ranks in 2 simulated islands, nvidia + amd)
against Open MPI's MPI_Allreduce (Debian's openmpi, 2 processes), fp32
all-reduce (sum, in place) 8 B .. 64 MiB, on this machine, in one run. Open
MPI runs twice per repeat: with its defaults (shared memory between local
processes: what a user gets) and with TCP only (ob1, btl tcp,self over lo:
the transport gpubridge's bridge uses). Each side keeps its best time per size
over --repeat alternating runs. Writes OUT/mpi_allreduce.{json,png}; the last
line is `algbw_ratio_64MiB <x> latency_ratio_8B <y>` (gpubridge over Open MPI
with its defaults)."""
import argparse
import os
import shutil
import subprocess
import sys

from perfjob import perf_args, run_local, series, size_arg
from plot import plot_busbw
from ranks import rows_to_series
from report import best, final_line, machine, markdown, save

HERE = os.path.dirname(os.path.abspath(__file__))
TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]


def mpi_builds():
    """mpicc and mpirun are there and mpicc finds mpi.h (openmpi-bin brings
    mpicc without the headers, which come with libopenmpi-dev)."""
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        return False
    probe = subprocess.run(["mpicc", "-E", "-x", "c", "-"], input="#include <mpi.h>\n", capture_output=True, text=True)
    return probe.returncode == 0


def ensure_mpicc():
    if mpi_builds():
        return
    if os.geteuid() != 0:
        raise SystemExit("bench-mpi: mpicc or mpi.h is missing; install Debian's libopenmpi-dev and openmpi-bin "
                         "(apt-get install libopenmpi-dev openmpi-bin) as root, then run again")
    print("bench-mpi: mpicc or mpi.h is missing: installing Debian's libopenmpi-dev and openmpi-bin with apt-get",
          flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "libopenmpi-dev", "openmpi-bin"],
                   check=True, env=env)


def run_mpi(prog, extra, a):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none"] + extra + [
        prog, "-b", str(a.b), "-e", str(a.e), "-n", str(a.n), "-w", str(a.w)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit("bench-mpi: %s exited %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    import json
    return rows_to_series([json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")])


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

ensure_mpicc()
prog = os.path.join(a.build, "bench", "mpi_allreduce")
os.makedirs(os.path.dirname(prog), exist_ok=True)
subprocess.run(["mpicc", "-O2", "-o", prog, os.path.join(HERE, "mpi_allreduce.c")], check=True)
version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]

gb_runs, shm_runs, tcp_runs, meta = [], [], [], {}
for k in range(a.repeat):
    print("bench-mpi: run %d of %d: gpubridge-perf, 2 ranks, nvidia:1,amd:1 (simulated)" % (k + 1, a.repeat),
          flush=True)
    meta, rows, _ = run_local(a.build, 2, "nvidia:1,amd:1", perf_args("all_reduce", a.b, a.e, 2, a.n, a.w))
    gb_runs.append(series(rows, "in_place"))
    print("bench-mpi: run %d of %d: %s, defaults, then TCP only" % (k + 1, a.repeat, version), flush=True)
    shm_runs.append(run_mpi(prog, [], a))
    tcp_runs.append(run_mpi(prog, TCP, a))

gb, shm, tcp = best(gb_runs, 1.0), best(shm_runs, 1.0), best(tcp_runs, 1.0)  # 2 ranks: busbw = algbw
print(markdown(["gpubridge", "Open MPI", "Open MPI tcp"], [gb, shm, tcp]))
tcp_algbw = gb[max(gb)]["algbw_gbps"] / tcp[max(tcp)]["algbw_gbps"]
tcp_lat = gb[min(gb)]["time_us"] / tcp[min(tcp)]["time_us"]
print("against Open MPI over TCP only: algbw ratio at %d B %.3f, latency ratio at %d B %.3f"
      % (max(gb), tcp_algbw, min(gb), tcp_lat))
save(os.path.join(a.out, "mpi_allreduce.json"),
     {"what": "fp32 all-reduce sum in place, 2 ranks; gpubridge simulated (nvidia:1,amd:1) vs Open MPI "
              "MPI_Allreduce (defaults, and TCP only)",
      "iters": a.n, "warmup": a.w, "repeat": a.repeat,
      "machine_before": before, "machine_after": machine(), "openmpi": version, "gpubridge_meta": meta,
      "gpubridge": {str(s): v for s, v in sorted(gb.items())},
      "openmpi_default": {str(s): v for s, v in sorted(shm.items())},
      "openmpi_tcp": {str(s): v for s, v in sorted(tcp.items())},
      "result": final_line(gb, shm), "result_vs_tcp": final_line(gb, tcp)})
plot_busbw(os.path.join(a.out, "mpi_allreduce.png"),
           "fp32 all-reduce, 2 ranks: gpubridge (2 simulated islands) vs Open MPI",
           {"gpubridge (simulated, nvidia + amd)": gb, "%s (defaults: shared memory)" % version: shm,
            "%s (TCP only, lo)" % version: tcp},
           "simulated on a %d-core machine; best of %d runs; busbw = algbw for 2 ranks" % (os.cpu_count(), a.repeat))
print(final_line(gb, shm))
sys.exit(0)
