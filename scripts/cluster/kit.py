"""What the cluster kit's steps share (standard-library Python): options,
finding gpubridge's tools (--bin, else PATH), launching under Slurm (srun,
heterogeneous steps across partitions) or on this machine (gpubridge-run:
simulated vendors, or this machine's GPUs with the AMD ranks on the
emulated-AMD rig), every command under a hard time limit, and the results
file (one JSON per kit run, each step adding its part). docs/RUNBOOK.md,
section 2, says how an operator runs the steps.
"""
import argparse
import datetime
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = "results.json"
EMULATED_AMD = os.path.join(HERE, "emulated_amd.sh")
# The emulated-AMD rig's libraries (tests/gpu/emulated_amd), as emulated_amd.sh names them to gpubridge.
RIG_LIBS = ("libamdhip64.so", "libhiprtc.so", "librccl.so.1")


def options(doc, extra=None):
    """The options every step takes; extra(parser) adds a step's own."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the kit run's folder (results.json and each step's output); "
                   "on a cluster, on a file system every node sees")
    p.add_argument("--bin", help="folder holding gpubridge-perf, gpubridge-info, gpubridge-run (default: PATH)")
    p.add_argument("--launcher", choices=("auto", "slurm", "local"), default="auto",
                   help="slurm: srun across the partitions; local: gpubridge-run on this machine; "
                   "auto: slurm where sinfo answers (default)")
    p.add_argument("--nvidia-partition", default="nvidia")
    p.add_argument("--amd-partition", default="amd")
    p.add_argument("--nodes", help="NVIDIA_NODE,AMD_NODE (default: the first node of each partition in sinfo)")
    p.add_argument("--ranks", type=int, default=2, help="ranks (GPUs) per node in the island and mixed jobs (2)")
    p.add_argument("--vendors", help="local launcher with --simulate: gpubridge-run --vendors of the mixed job "
                   "(default nvidia:RANKS,amd:RANKS)")
    p.add_argument("--simulate", action="store_true",
                   help="CPU only: GPUBRIDGE_VENDOR per partition (nvidia, amd), no --baseline")
    p.add_argument("--emulated-amd", metavar="RIG",
                   help="local launcher on NVIDIA GPUs: the AMD ranks run on the emulated-AMD rig in RIG "
                   "(<build>/tests/emulated_amd: HIP, HIPRTC and RCCL served by CUDA, NVRTC and NCCL)")
    p.add_argument("--gpus", type=int, help="local launcher on real GPUs: how many this machine has "
                   "(default: CUDA_VISIBLE_DEVICES's count, else nvidia-smi -L's); an island gets at most one rank "
                   "per GPU, and rank LOCAL_RANK takes GPU LOCAL_RANK modulo N")
    p.add_argument("--port", type=int, default=29551, help="first port the kit's own rendezvous use (29551)")
    if extra:
        extra(p)
    a = p.parse_args()
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    if a.launcher == "auto":
        a.launcher = "slurm" if shutil.which("sinfo") and run(["sinfo", "-h"], 15).returncode == 0 else "local"
    check_local(a)
    return a


def check_local(a):
    """Refuses what would run other ranks than asked: --vendors sets GPUBRIDGE_VENDOR, which simulates
    ranks even on a GPU; --emulated-amd needs the local launcher, real GPUs and the rig's libraries."""
    if a.vendors and not (a.launcher == "local" and a.simulate):
        die("--vendors simulates the ranks (GPUBRIDGE_VENDOR): give it with --launcher local --simulate")
    if not a.emulated_amd:
        return
    if a.launcher != "local" or a.simulate:
        die("--emulated-amd runs AMD ranks on this machine's NVIDIA GPUs: give it with --launcher local, "
            "without --simulate")
    a.emulated_amd = os.path.abspath(a.emulated_amd)
    for lib in RIG_LIBS:
        if not os.path.exists(os.path.join(a.emulated_amd, lib)):
            die("--emulated-amd %s: no %s there (build the emulated-AMD rig: <build>/tests/emulated_amd)"
                % (a.emulated_amd, lib))


def tool(a, name):
    path = os.path.join(a.bin, name) if a.bin else shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        die("%s not found (%s): give --bin BUILD/bin or put it on PATH" % (name, path or "not on PATH"))
    return os.path.abspath(path)


def die(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def run(cmd, timeout, env=None, log=None):
    """cmd under a hard time limit: at timeout its process group gets SIGTERM
    (srun then cancels its step), SIGKILL 10 s later; returncode 124 then.
    Output (stdout and stderr together) in .stdout, also written to log."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             text=True, env=env, start_new_session=True, errors="replace")
    except OSError as e:
        return subprocess.CompletedProcess(cmd, 127, "cannot start %s: %s\n" % (cmd[0], e))
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        out = (out or "") + "\n(stopped at the time limit, %d s)\n" % timeout
        rc = 124
    res = subprocess.CompletedProcess(cmd, rc, out or "")
    res.seconds = time.monotonic() - t0
    if log:
        with open(log, "w") as f:
            f.write("$ %s\n%s(exit %d after %.1f s)\n" % (" ".join(cmd), res.stdout, rc, res.seconds))
    return res


# -- where the ranks run ------------------------------------------------------
def nodes(a):
    """{vendor: node} under Slurm; {} on the local launcher."""
    if a.launcher != "slurm":
        return {}
    if a.nodes:
        nv, amd = a.nodes.split(",")
        return {"nvidia": nv, "amd": amd}
    got = {}
    for vendor, part in (("nvidia", a.nvidia_partition), ("amd", a.amd_partition)):
        p = run(["sinfo", "-h", "-N", "-p", part, "-o", "%N"], 30)
        names = p.stdout.split()
        if p.returncode != 0 or not names:
            die("no node in partition %s (sinfo: %s); name them with --nodes" % (part, p.stdout.strip()))
        got[vendor] = names[0]
    return got


def part(a, vendor):
    return a.nvidia_partition if vendor == "nvidia" else a.amd_partition


def component(a, vendor, ntasks, env=None, per_node=False):
    """srun options of one component: the vendor's partition and node, ntasks
    ranks, env (GPUBRIDGE_VENDOR with --simulate) exported on top of ALL."""
    env = dict(env or {})
    if a.simulate:
        env.setdefault("GPUBRIDGE_VENDOR", vendor)
    opts = ["-p", part(a, vendor), "-w", nodes_cached(a)[vendor], "-N", "1"]
    opts += ["--ntasks-per-node=1"] if per_node else ["-n", str(ntasks)]
    opts.append("--export=" + ",".join(["ALL"] + ["%s=%s" % kv for kv in sorted(env.items())]))
    return opts


_nodes = {}


def nodes_cached(a):
    if "v" not in _nodes:
        _nodes["v"] = nodes(a)
    return _nodes["v"]


def srun(a, components, cmd, limit_s):
    """One srun step: components [(vendor, ntasks, env)]; two make a heterogeneous step."""
    line = ["srun", "-l", "-t", str(max(1, (limit_s + 59) // 60)), "--kill-on-bad-exit=1"]
    for k, (vendor, ntasks, env) in enumerate(components):
        if k:
            line.append(":")
        line += component(a, vendor, ntasks, env) + cmd
    return line


# -- jobs on this machine (the local launcher) --------------------------------
def real_gpus(a):
    """Local launcher on real GPUs: how many GPUs this machine's ranks share
    (--gpus, else CUDA_VISIBLE_DEVICES's count where it is set, else
    nvidia-smi -L's); None under Slurm or --simulate (no limit the kit knows
    of). Stops the kit when it cannot tell."""
    if a.launcher != "local" or a.simulate:
        return None
    if a.gpus is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            a.gpus = len([d for d in visible.split(",") if d.strip()])
        else:
            p = run(["nvidia-smi", "-L"], 30)
            a.gpus = sum(line.startswith("GPU ") for line in p.stdout.splitlines()) if p.returncode == 0 else 0
        if not a.gpus:
            die("the local launcher on real GPUs runs on this machine's NVIDIA GPUs (the AMD ranks on the "
                "emulated-AMD rig), and it found none (CUDA_VISIBLE_DEVICES, nvidia-smi -L): give --gpus N, "
                "--simulate, or run on the cluster (--launcher slurm)")
    return a.gpus


def per_vendor(a):
    """Ranks of each vendor in the mixed and training jobs: --ranks, or, on
    this machine's GPUs, as many as it has GPUs where that is fewer."""
    g = real_gpus(a)
    return min(a.ranks, g) if g else a.ranks


def fewer_ranks(a):
    """Why the mixed and training jobs have fewer ranks per vendor than --ranks, or None."""
    if per_vendor(a) == a.ranks:
        return None
    return ("%d rank(s) per vendor, not %d: this machine has %d GPU(s), and NCCL and RCCL refuse two ranks "
            "of one communicator on one GPU" % (per_vendor(a), a.ranks, real_gpus(a)))


def cannot_run(a, islands):
    """Why a job of islands [(vendor, ranks)] cannot run on this machine, or
    None (always None under Slurm and --simulate): an AMD rank needs the
    emulated-AMD rig (--emulated-amd), an island at most one rank per GPU."""
    if a.launcher != "local" or a.simulate:
        return None
    if any(v == "amd" for v, _ in islands) and not a.emulated_amd:
        return "the local launcher runs AMD ranks on the emulated-AMD rig only: give --emulated-amd RIG"
    g, big = real_gpus(a), max(n for _, n in islands)
    if g and big > g:
        return ("an island of %d ranks needs %d GPUs, this machine has %d (NCCL and RCCL refuse two ranks of one "
                "communicator on one GPU)" % (big, big, g))
    return None


def local_job(a, comps, cmd, limit_s, base_env=None, vendors=None):
    """gpubridge-run's line and environment (base_env, else this process's,
    with the components') for a job of comps [(vendor, ranks, env)] in rank
    order on this machine: --vendors (vendors, else the components') with
    --simulate; else real GPUs, each rank through emulated_amd.sh (GPU
    LOCAL_RANK modulo the GPUs; the AMD ranks, the last components, on the
    emulated-AMD rig)."""
    n = sum(c[1] for c in comps)
    env = dict(os.environ if base_env is None else base_env)
    env.update({k: v for c in comps for k, v in c[2].items()})
    line = [tool(a, "gpubridge-run"), "-n", str(n), "--timeout", str(limit_s)]
    if a.simulate:
        line += ["--vendors", vendors or ",".join("%s:%d" % c[:2] for c in comps)]
    else:
        env.update(emulated_env(a, sum(c[1] for c in itertools.takewhile(lambda c: c[0] != "amd", comps))))
        cmd = ["sh", EMULATED_AMD] + cmd
    return line + ["--"] + cmd, env


def emulated_env(a, first_amd):
    """What emulated_amd.sh reads: the rig (if any), the first AMD rank, the GPUs."""
    return {"GB_KIT_RIG": a.emulated_amd or "", "GB_KIT_AMD_FROM": str(first_amd), "GB_KIT_GPUS": str(real_gpus(a))}


# -- the results file ---------------------------------------------------------
def results_path(a):
    return os.path.join(a.out, RESULTS)


def load(a):
    path = results_path(a)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"kit": "gpubridge cluster kit", "format": 1,
            "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "login_host": socket.gethostname(), "platform": platform.platform(), "steps": {}}


def save(a, results):
    path = results_path(a)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def describe(a, results):
    """Metadata every step fills in once: launcher, nodes, this machine's GPUs
    and the emulated-AMD rig (local launcher), gpubridge's build
    (gpubridge-info's header lines), the GPUBRIDGE_* variables of the kit's
    environment (rank 0's, as gpubridge-perf printed them, come with the
    ladder)."""
    results["launcher"] = a.launcher
    results["partitions"] = {"nvidia": a.nvidia_partition, "amd": a.amd_partition}
    results["nodes"] = nodes_cached(a)
    results["simulated"] = a.simulate
    results["emulated_amd"] = a.emulated_amd
    results["gpus"] = real_gpus(a)
    if "gpubridge" not in results:
        p = run([tool(a, "gpubridge-info")], 30)
        build = {}
        for line in p.stdout.splitlines():
            if line[:1] in (" ", "\t") or not line.strip():
                continue
            k, _, v = line.partition(" ")
            build.setdefault(k, v.strip())
        v = run([tool(a, "gpubridge-perf"), "--version"], 30).stdout.strip()
        results["gpubridge"] = {"version": v, "build": build, "bin": os.path.dirname(tool(a, "gpubridge-perf"))}
    results["environment"] = {k: ("(hidden)" if "SECRET" in k else v) for k, v in sorted(os.environ.items())
                              if k.startswith("GPUBRIDGE_")}
