"""The cost of a bridged all-reduce at scale: thousands of ranks, tens of
islands (docs/SCALE.md).

Prediction (no library needed):

    python3 bench/scale_model.py --ranks 2048 --islands 16 --rails 4 \\
        --link-gbps 200 --step-ms 300 --bytes 1G

Check against simulated jobs of growing size on this machine:

    python3 bench/scale_model.py --check --build build

What gpubridge does among the leaders (src/algo/allreduce.c, src/plan/plan.c,
src/stage/slots_setup.c): the bridge group holds one leader per island (L
members) and runs, per chunk, a host all-reduce: the *exchange* (every
member sends its chunk to every other, one step) below GPUBRIDGE_RING_MIN_BYTES
(64 KiB) or with two members, or over remote slots (members on several hosts,
at most 4: each part goes straight to every member); otherwise the *ring*
(reduce-scatter then all-gather, 2(L-1) steps). There is no tree among the
leaders; model_tree() is the alternative, for comparison. With k rails
(split-rail: k = the smallest island's size, capped by GPUBRIDGE_RAILS) rail
i joins the ranks of island index i, one per island, and each rail runs the
same all-reduce on 1/k of the bytes, the rails in parallel.

Units: bytes, seconds, bytes per second (the CLI takes Gbit/s and GB/s and
converts)."""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from perfjob import size_arg

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
RING_MIN_BYTES = 64 * KIB          # GPUBRIDGE_RING_MIN_BYTES default
REMOTE_SLOTS_MAX = 4               # GB_STAGE_REMOTE_MAX (src/stage/stage.h)
GPU_CHUNK_BYTES = 16 * MIB         # plan/sizes.h: a GPU's chunk (8 MiB under 64 MiB messages)
GPU_MID_CHUNK_BYTES = 8 * MIB
GPU_MID_LIMIT = 64 * MIB


# ---------------------------------------------------------------- leaders

def model_ring(L, S, alpha, B):
    """Ring all-reduce of S bytes over L members, each with a link of B
    bytes/s: 2(L-1) steps of alpha, 2(L-1)/L * S through each member's link."""
    if L <= 1:
        return 0.0
    return 2 * (L - 1) * alpha + 2.0 * (L - 1) / L * S / B


def model_exchange(L, S, alpha, B):
    """gpubridge's exchange: every member sends its whole S to each of the
    L-1 others at once and folds them all; one step, (L-1) * S through each
    member's link."""
    if L <= 1:
        return 0.0
    return alpha + (L - 1) * S / B


def model_tree(L, S, alpha, B):
    """Not in gpubridge: a pipelined double binary tree (NCCL's tree): reduce
    up and broadcast down, 2 ceil(log2 L) steps of alpha, each link carrying
    about S each way: 2 * S / B (pipeline fill neglected)."""
    if L <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(L)) * alpha + 2.0 * S / B


def leader_algorithm(L, S, hosts_differ=True, topology="gpubridge", ring_min=RING_MIN_BYTES):
    """The name of the algorithm the leaders run for a chunk of S bytes.
    topology: 'gpubridge' (what the code does), 'ring', 'exchange', 'tree'."""
    if topology != "gpubridge":
        return topology
    if L <= 1:
        return "none"
    if L == 2 or S < ring_min:
        return "exchange"
    if hosts_differ and L <= REMOTE_SLOTS_MAX:
        return "exchange"   # remote slots: each part straight to every member
    return "ring"


def leader_time(L, S, alpha, B, topology="gpubridge", hosts_differ=True):
    alg = leader_algorithm(L, S, hosts_differ, topology)
    return {"none": lambda *a: 0.0, "ring": model_ring, "exchange": model_exchange,
            "tree": model_tree}[alg](L, S, alpha, B)


# ---------------------------------------------------------------- one job

AUTO_SPLIT_RAIL_BYTES_K2 = 2 * MIB    # plan/plan.c: auto's split-rail thresholds
AUTO_SPLIT_RAIL_BYTES_K3 = 32 * MIB


def auto_rails(S, k):
    """The rails policy auto uses for one all-reduce call of S bytes with k
    possible rails (plan/plan.c): split-rail from 2 MiB at k = 2 and from
    32 MiB at k >= 3, else hierarchical (one rail)."""
    if k >= 3 and S >= AUTO_SPLIT_RAIL_BYTES_K3:
        return k
    if k == 2 and S >= AUTO_SPLIT_RAIL_BYTES_K2:
        return k
    return 1


def model_step(total_bytes, bucket_bytes, ranks, islands, rails=1, auto=True, **kw):
    """A step's gradients all-reduced in calls of bucket_bytes (DDP's
    buckets, 25 MiB by default; 0: one call), one after another: the sum of
    model_allreduce over the calls. auto: the rails each call gets under
    GPUBRIDGE_POLICY=auto (auto_rails), else rails as given."""
    b = bucket_bytes if bucket_bytes and bucket_bytes < total_bytes else total_bytes
    full, rest = divmod(total_bytes, b)
    out = {"total_s": 0.0, "bridge_s": 0.0, "island_s": 0.0, "calls": 0}
    kmax = max(1, min(rails, ranks // max(1, islands)))
    for size, count in ((b, full), (rest, 1 if rest else 0)):
        if not count:
            continue
        k = auto_rails(size, kmax) if auto else kmax
        r = model_allreduce(size, ranks, islands, rails=k, **kw)
        for key in ("total_s", "bridge_s", "island_s"):
            out[key] += count * r[key]
        out["calls"] += count
        out.setdefault("per_call", r)
    return out


def chunk_bytes(S, chunk=None):
    """plan/sizes.h's GPU rule unless chunk is given: 8 MiB chunks under
    64 MiB, else 16 MiB."""
    if chunk:
        return chunk
    return GPU_MID_CHUNK_BYTES if S < GPU_MID_LIMIT else GPU_CHUNK_BYTES


def model_allreduce(S, ranks, islands, rails=1, link_Bps=100e9 / 8, alpha=10e-6, island_Bps=100e9,
                    island_alpha=20e-6, pcie_Bps=25e9, fold_Bps=None, handover=20e-6, chunk=None,
                    topology="gpubridge", hosts_differ=True):
    """Predicted time of one all-reduce of S bytes, split into its parts.

    ranks N, islands L (equal islands of N/L ranks; the smallest island bounds
    the rails), rails k (1: hierarchical, >= 2: split-rail; capped at N/L),
    link_Bps B_link: each leader's (each rail member's) network bandwidth,
    alpha: one network hop's latency among leaders, island_Bps: the island's
    own reduce and broadcast bandwidth (NCCL or RCCL, bus bandwidth),
    island_alpha: its latency per call, pcie_Bps: staging copy bandwidth
    (device to pinned host, and back), fold_Bps: where the fold of the peers'
    parts is not on the device, its rate (None: on the device, hidden),
    handover: the fixed cost of a chunk's hand-over between stream and proxy
    (each way), chunk: chunk bytes (default plan/sizes.h), topology: leaders'
    algorithm ('gpubridge', 'ring', 'exchange', 'tree').

    The chunks pipeline through five stages (island reduce, stage out, the
    leaders' all-reduce, stage in, island broadcast): T = the sum of the
    stages for one chunk (fill) + (chunks - 1) * the slowest stage. The
    bridge's part is T less the island steps alone (2 + chunks - 1 island
    stages): what crossing islands adds to the job's own collectives."""
    L = max(1, islands)
    per_island = ranks / L
    k = max(1, min(rails, int(per_island)))
    C = min(chunk_bytes(S, chunk), S) if S > 0 else 1
    nchunks = max(1, math.ceil(S / C))
    c_rail = C / k                    # each rail carries 1/k of a chunk
    isl = (island_alpha + C / island_Bps) if per_island > 1 else 0.0
    copy = handover + c_rail / pcie_Bps
    net = leader_time(L, c_rail, alpha, link_Bps, topology, hosts_differ)
    if fold_Bps:
        net += (L - 1) / L * c_rail / fold_Bps
    stages = [isl, copy, net, copy, isl]
    total = sum(stages) + (nchunks - 1) * max(stages)
    island_only = 2 * isl + (nchunks - 1) * isl   # the island steps alone, pipelined
    return {
        "total_s": total,
        "bridge_s": total - island_only if L > 1 else 0.0,   # what the bridge adds
        "island_s": island_only,
        "chunks": nchunks, "chunk_bytes": C, "rails": k,
        "algorithm": leader_algorithm(L, c_rail, hosts_differ, topology),
        "bottleneck": ["island reduce", "stage out", "leaders", "stage in", "island broadcast"][
            stages.index(max(stages))],
    }


def share_of_step(bridge_s, step_s, overlap=0.0):
    """The bridge's share of a step of step_s seconds, when a fraction
    overlap of the bridge time hides behind compute."""
    exposed = bridge_s * (1 - overlap)
    return exposed / step_s if step_s > 0 else float("nan")


# ---------------------------------------------------------------- simulated machine

def sim_features(N, L, S, ring_min=RING_MIN_BYTES):
    """The simulated job's cost on one machine, where all N ranks share the
    same cores:

        T = a0 + a_hop * N * n + a_ring * [S >= ring_min] * N * n
              + S * (b_isl * (N - L) + b_br * L)

    n = N / L ranks an island. A hop of an island's chain or ring (n - 1 of
    them) waits for a wake-up among the N processes on the cores: N * n;
    from GPUBRIDGE_RING_MIN_BYTES the host island's ring adds its own hops
    (a_ring). Each byte crosses the N - L non-leaders' island steps and the L
    leaders' staging and fold, all on the same cores."""
    n = N / L
    return [1.0, N * n, (1.0 if S >= ring_min else 0.0) * N * n, S * (N - L), S * float(L)]


SIM_CONSTANTS = ("a0 us", "a_hop us", "a_ring us", "b_isl ns/B", "b_br ns/B")


def fit(rows):
    """Least squares of time_s on sim_features over rows (N, L, S, time_s),
    each row weighted by 1/time (relative error): returns the constants."""
    n = len(sim_features(1, 1, 1))
    A = [[0.0] * n for _ in range(n)]
    y = [0.0] * n
    for N, L, S, t in rows:
        f = [x / t for x in sim_features(N, L, S)]
        for i in range(n):
            y[i] += f[i]
            for j in range(n):
                A[i][j] += f[i] * f[j]
    return solve(A, y)


def solve(A, y):
    """Gaussian elimination with partial pivoting (A small, square)."""
    n = len(y)
    M = [row[:] + [y[i]] for i, row in enumerate(A)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        M[c], M[p] = M[p], M[c]
        if abs(M[c][c]) < 1e-300:
            raise ValueError("singular fit: the jobs do not tell the constants apart")
        for r in range(n):
            if r != c:
                m = M[r][c] / M[c][c]
                for j in range(c, n + 1):
                    M[r][j] -= m * M[c][j]
    return [M[i][n] / M[i][i] for i in range(n)]


def sim_predict(consts, N, L, S):
    return sum(c * f for c, f in zip(consts, sim_features(N, L, S)))


def cpu_busy(window=1.0):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(window)  # a sampling window, not synchronisation
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(deadline_s, max_busy=0.1):
    """Waits, until deadline_s at most, for a quiet machine: the CPUs under
    max_busy busy in each of two one-second samples. The 1-minute load is
    read and recorded, not waited on: our own previous job keeps it up for a
    minute after it ended. Returns (loadavg, busy)."""
    end = time.time() + deadline_s
    while True:
        with open("/proc/loadavg") as f:
            load = float(f.read().split()[0])
        busy = max(cpu_busy(), cpu_busy())
        if busy < max_busy or time.time() > end:
            return load, busy


def vendors(N, L):
    names = ["nvidia", "amd", "intel", "cpu"] + ["v%d" % i for i in range(4, 64)]
    base, extra = divmod(N, L)
    return ",".join("%s:%d" % (names[i], base + (1 if i < extra else 0)) for i in range(L))


def run_job(build, N, L, sizes, iters, timeout):
    """One gpubridge-perf all_reduce job (hierarchical, in-place column):
    {size: time_s}, and the job's wall time."""
    env = dict(os.environ, GPUBRIDGE_POLICY="hierarchical")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "perf.json")
        cmd = [os.path.join(build, "bin", "gpubridge-run"), "-n", str(N), "--vendors", vendors(N, L), "--",
               os.path.join(build, "bin", "gpubridge-perf"), "all_reduce", "-b", str(min(sizes)),
               "-e", str(max(sizes)), "-f", str(sizes[1] // sizes[0] if len(sizes) > 1 else 2),
               "-n", str(iters), "-w", "1", "-c", "0", "-J", out]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        wall = time.time() - t0
        if p.returncode != 0:
            raise RuntimeError("exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-400:]))
        res = {}
        with open(out) as f:
            for line in f:
                o = json.loads(line) if line.strip() else {}
                if "size_bytes" in o:
                    res[o["size_bytes"]] = min(o[c]["time_us"] for c in ("out_of_place", "in_place")
                                               if o.get(c)) * 1e-6
        return res, wall


SMALL_JOBS = [(4, 2), (6, 3), (8, 2), (8, 4), (16, 2), (16, 4), (16, 8)]
LARGE_JOBS = [(24, 3), (32, 2), (32, 4), (32, 8), (48, 6), (64, 8), (96, 8), (128, 8)]
CHECK_SIZES = [4 * KIB, 128 * KIB, 4 * MIB]   # one job: -b 4K -e 4M -f 32


def measure(args):
    """Runs every job args.repeats times; the best time per size."""
    large = [j for j in LARGE_JOBS if j[0] <= args.max_ranks]
    print("# scale_check: %s, %d cores, gpubridge-perf all_reduce, GPUBRIDGE_POLICY=hierarchical, -n %d, "
          "best of %d runs" % (time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), args.iters, args.repeats))
    meas, loads = [], []
    for N, L in SMALL_JOBS + large:
        best = {}
        for _ in range(args.repeats):
            load, busy = wait_quiet(args.quiet_deadline)
            loads.append((load, busy))
            try:
                r, wall = run_job(args.build, N, L, CHECK_SIZES, args.iters, args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print("# N %d L %d failed: %s" % (N, L, str(e).splitlines()[0][:200]), flush=True)
                break
            for s, t in r.items():
                best[s] = min(best.get(s, t), t)
            print("# N %3d L %d  load %.2f busy %.2f  wall %.1f s  %s" % (
                N, L, load, busy, wall, " ".join("%d:%.3gms" % (s, t * 1e3) for s, t in sorted(r.items()))),
                flush=True)
        meas += [[N, L, s, t] for s, t in sorted(best.items())]
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count(), "repeats": args.repeats,
            "iters": args.iters, "loads": loads, "rows": meas}


def report(data):
    """Fits on the small jobs, prints predicted against measured for the others."""
    small = set(SMALL_JOBS)
    rows = [tuple(r) for r in data["rows"]]
    consts = fit([r for r in rows if (r[0], r[1]) in small])
    scale = (1e6, 1e6, 1e6, 1e9, 1e9)
    print("# fitted on jobs of up to 16 ranks: " + ", ".join(
        "%s %.3f" % (n, c * k) for n, c, k in zip(SIM_CONSTANTS, consts, scale)))
    print("| ranks | islands | bytes | measured ms | predicted ms | measured / predicted |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios, jobs = [], set()
    for N, L, s, t in rows:
        if (N, L) in small:
            continue
        pr = sim_predict(consts, N, L, s)
        ratios.append(t / pr)
        jobs.add((N, L))
        print("| %d | %d | %d | %.3f | %.3f | %.2f |" % (N, L, s, t * 1e3, pr * 1e3, t / pr))
    loads = data.get("loads") or [(float("nan"), float("nan"))]
    print("# before each run: loadavg %.2f-%.2f, CPUs busy %.2f-%.2f (1 s sample)" % (
        min(l for l, _ in loads), max(l for l, _ in loads), min(b for _, b in loads), max(b for _, b in loads)))
    print("scale_check jobs %d ratio_min %.2f ratio_max %.2f" % (
        len(jobs), min(ratios) if ratios else float("nan"), max(ratios) if ratios else float("nan")))
    return 0 if ratios else 1


def check(args):
    if args.refit:
        with open(args.refit) as f:
            return report(json.load(f))
    data = measure(args)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(data, f)
    return report(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2048, help="ranks N (GPUs) in the job")
    ap.add_argument("--islands", type=int, default=16, help="islands L (equal ones of N/L ranks)")
    ap.add_argument("--rails", type=int, default=1, help="rails k (1: hierarchical, >= 2: split-rail)")
    ap.add_argument("--topology", default="gpubridge", choices=["gpubridge", "ring", "exchange", "tree"],
                    help="the leaders' algorithm (gpubridge: what the code runs; tree: not implemented)")
    ap.add_argument("--link-gbps", type=float, default=100.0, help="network Gbit/s per leader or rail member")
    ap.add_argument("--alpha-us", type=float, default=10.0, help="latency of one hop among leaders, us")
    ap.add_argument("--island-gbs", type=float, default=100.0, help="the island's reduce/broadcast GB/s")
    ap.add_argument("--island-alpha-us", type=float, default=20.0, help="the island's latency per call, us")
    ap.add_argument("--pcie-gbs", type=float, default=25.0, help="staging copy GB/s (device <-> pinned host)")
    ap.add_argument("--fold-gbs", type=float, default=0.0, help="host fold GB/s (0: folded on the device)")
    ap.add_argument("--handover-us", type=float, default=20.0, help="fixed cost per chunk and direction, us")
    ap.add_argument("--chunk", default=None, help="chunk bytes (default: plan/sizes.h's GPU rule)")
    ap.add_argument("--bytes", default="1G", help="bytes all-reduced per step (gradients)")
    ap.add_argument("--bucket", default="25M", help="bytes per all-reduce call (DDP's bucket); 0: one call")
    ap.add_argument("--no-auto", action="store_true", help="use --rails for every call (GPUBRIDGE_POLICY=split-rail)"
                    " instead of auto's thresholds (split-rail from 2 MiB at k = 2, 32 MiB at k >= 3)")
    ap.add_argument("--step-ms", type=float, default=0.0, help="the step's time, ms (for the share)")
    ap.add_argument("--overlap", type=float, default=0.0, help="fraction of the all-reduce hidden by compute")
    ap.add_argument("--check", action="store_true", help="run simulated jobs and compare with the model")
    ap.add_argument("--build", default="build")
    ap.add_argument("--max-ranks", type=int, default=64, help="--check: largest job")
    ap.add_argument("--repeats", type=int, default=3, help="--check: runs per job, best kept")
    ap.add_argument("--json", default=None, help="--check: also write the measurements here")
    ap.add_argument("--refit", default=None, help="--check: fit and report a --json file, run nothing")
    ap.add_argument("--iters", type=int, default=3, help="--check: timed iterations per size")
    ap.add_argument("--timeout", type=int, default=240, help="--check: seconds per job")
    ap.add_argument("--quiet-deadline", type=float, default=120.0,
                    help="--check: seconds to wait for a quiet machine before each run")
    a = ap.parse_args(argv)
    if a.check or a.refit:
        return check(a)
    S = size_arg(a.bytes)
    bucket = size_arg(a.bucket) if a.bucket else 0
    kw = dict(link_Bps=a.link_gbps * 1e9 / 8, alpha=a.alpha_us * 1e-6,
              island_Bps=a.island_gbs * 1e9, island_alpha=a.island_alpha_us * 1e-6, pcie_Bps=a.pcie_gbs * 1e9,
              fold_Bps=a.fold_gbs * 1e9 or None, handover=a.handover_us * 1e-6,
              chunk=size_arg(a.chunk) if a.chunk else None)
    r = model_step(S, bucket, a.ranks, a.islands, rails=a.rails, auto=not a.no_auto, topology=a.topology, **kw)
    c = r["per_call"]
    print("job: %d ranks, %d islands of %g, %g Gbit/s per link, %d bytes in %d call(s) of up to %d, leaders: %s (%s)"
          % (a.ranks, a.islands, a.ranks / a.islands, a.link_gbps, S, r["calls"], bucket or S, a.topology,
             c["algorithm"]))
    print("per call: %d rail(s), %d chunk(s) of %d B, slowest stage: %s" % (
        c["rails"], c["chunks"], c["chunk_bytes"], c["bottleneck"]))
    for topo in ("ring", "tree", "exchange"):
        o = model_step(S, bucket, a.ranks, a.islands, rails=a.rails, auto=not a.no_auto, topology=topo, **kw)
        print("  leaders as %-8s all-reduce %.2f ms, bridge %.2f ms" % (topo, o["total_s"] * 1e3, o["bridge_s"] * 1e3))
    line = "bridge_ms %.3f allreduce_ms %.3f" % (r["bridge_s"] * 1e3, r["total_s"] * 1e3)
    if a.step_ms > 0:
        step = a.step_ms * 1e-3
        line += " bridge_share %.3f allreduce_share %.3f" % (
            share_of_step(r["bridge_s"], step, a.overlap), share_of_step(r["total_s"], step, a.overlap))
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
