"""The matrix of the newer collectives: reduce, all-gather, reduce-scatter,
all-to-all, send/recv groups, PreMulSum (host and device scalars) and the
split-rail policy, over island layouts, policies, chunk and ring thresholds,
counts, every dtype and op, in and out of place (all-to-all in place is
sendbuff == recvbuff, NCCL 2.28's rule; a partial overlap must be refused).

Each job runs tests/rank_matrix under gpubridge-run; every rank computes the
expected bits itself (from docs/REDUCTION_ORDER.md) and compares bit for bit.
The driver checks that every rank reported "ok" and prints one line per job
with its time.

    python3 tests/mp/test_matrix.py [--only SUBSTRING] [--list]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BIG = 2 ** 20 + 3
# Odd; crosses 64 KiB chunks for every type wider than 1 byte, and
# reduce-scatter's m = chunk / (size * nranks) elements per block many times.
MEDIUM = 33001

# (chunk bytes, ring threshold bytes, GPUBRIDGE_RAILS or None)
SMALL = ("64K", "4K", None)        # chunk pipeline; ring and exchange per chunk
DEFAULTS = ("1M", "64K", None)     # the library's defaults, set explicitly
RING0 = ("4K", "0", None)          # ring wherever n >= 3, even on 1 element (empty slices)
EXCHANGE = ("256K", "1G", None)    # exchange order everywhere


def rails(settings, k):
    return settings[:2] + (str(k),)


C3 = "0,1,7"
C4 = "0,1,7,%d" % MEDIUM
SOME = "int8,uint32,int64,float16,float32,float64,bfloat16"
FEW = "uint8,int32,float16,bfloat16,float64"

# Case sets (rank_matrix arguments). Premul all-reduce everywhere; the other
# collectives in full where their path differs, lighter where it repeats.
# Chunked reduce and reduce-scatter of MEDIUM elements cost the most (tens of
# host steps each): every dtype and op on small counts, some on MEDIUM.
NEW_FULL = ["--allreduce", C4 + ":all:pmh,pmd:oi",
            "--allreduce", "7,%d:float16,bfloat16,float32,float64:pmh=3,pmd=0.25:o" % MEDIUM,
            "--reduce", C3 + ":all:all:oi:0,1,-1",
            "--reduce", "%d:%s:sum,max,avg,pmh,pmd:oi:0,-1" % (MEDIUM, SOME),
            "--reducescatter", C3 + ":all:all:oi",
            "--reducescatter", "%d:%s:sum,prod,avg,pmh,pmd:oi" % (MEDIUM, SOME),
            "--allgather", C4 + ":all:-:oi",
            "--alltoall", "0,1,7:all:-:oi",
            "--alltoall", "%d:int8,float64:-:oi" % MEDIUM,
            "--sendrecv", "0,1,7,1000:int8,float16,uint32,float64:all"]
NEW_LIGHT = ["--allreduce", "1,7,%d:%s:pmh,pmd:oi" % (MEDIUM, FEW),
             "--reduce", "0,7,%d:%s:sum,max,avg,pmd:oi:0,-1" % (MEDIUM, FEW),
             "--reducescatter", "0,7,%d:%s:sum,prod,avg,pmh:oi" % (MEDIUM, FEW),
             "--allgather", "0,7,%d:%s:-:oi" % (MEDIUM, FEW),
             "--alltoall", "0,1,7,%d:%s:-:oi" % (MEDIUM, FEW),
             "--sendrecv", "0,7,1000:float32,uint8:all"]
# split-rail is an all-reduce policy: every op there, PreMulSum included.
RAIL_AR = ["--allreduce", C4 + ":all:all:oi"]
RAIL_AR_LIGHT = ["--allreduce", "1,7,%d:%s:sum,prod,avg,pmh,pmd:oi" % (MEDIUM, SOME)]
# In place with blocks larger than a shared-memory ring (2 MiB): a block
# received lands before the one in its place has left unless the sends go
# from a copy.
BIG_A2A = ["--alltoall", "%d:float64:-:i" % BIG]
BIG_NEW = ["--reduce", "%d:float32:sum:o:-1" % BIG,
           "--reducescatter", "%d:bfloat16:avg:i" % BIG,
           "--allgather", "%d:float32:-:o" % BIG,
           "--allreduce", "%d:bfloat16:pmd:o" % BIG]
BIG_RAIL = ["--allreduce", "%d:float32,float16:sum,avg:o" % BIG,
            "--allreduce", "%d:int64:pmh:i" % BIG]

# (vendors, policy, settings, cases)
JOBS = [
    # one island
    ("nvidia:1", "auto", SMALL, NEW_FULL + BIG_NEW),
    ("nvidia:1", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    ("amd:3", "auto", RING0, NEW_FULL),
    ("amd:3", "native", SMALL, NEW_LIGHT + BIG_A2A),
    ("amd:3", "hierarchical", SMALL, NEW_LIGHT),
    ("amd:3", "flat", RING0, NEW_LIGHT),
    ("amd:3", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    # two equal islands
    ("nvidia:2,amd:2", "auto", SMALL, NEW_FULL),
    ("nvidia:2,amd:2", "hierarchical", DEFAULTS, NEW_LIGHT + BIG_NEW + BIG_A2A),
    ("nvidia:2,amd:2", "flat", RING0, NEW_LIGHT),
    ("nvidia:2,amd:2", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    ("nvidia:2,amd:2", "split-rail", rails(SMALL, 1), RAIL_AR_LIGHT),
    # two unequal islands
    ("nvidia:1,amd:2", "auto", SMALL, NEW_FULL),
    ("nvidia:1,amd:2", "flat", EXCHANGE, NEW_LIGHT),
    ("nvidia:1,amd:2", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    ("nvidia:3,amd:2", "auto", RING0, NEW_FULL),
    ("nvidia:3,amd:2", "hierarchical", SMALL, NEW_LIGHT),
    ("nvidia:3,amd:2", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    ("nvidia:3,amd:2", "split-rail", DEFAULTS, RAIL_AR_LIGHT + BIG_RAIL),
    # interleaved
    ("nvidia,amd,nvidia,amd", "auto", SMALL, NEW_FULL),
    ("nvidia,amd,nvidia,amd", "flat", SMALL, NEW_LIGHT),
    ("nvidia,amd,nvidia,amd", "split-rail", RING0, RAIL_AR + NEW_LIGHT),
    # three islands
    ("nvidia:1,amd:2,intel:2", "auto", SMALL, NEW_FULL),
    ("nvidia:1,amd:2,intel:2", "flat", RING0, NEW_LIGHT),
    ("nvidia:1,amd:2,intel:2", "split-rail", SMALL, RAIL_AR + NEW_LIGHT),
    ("nvidia,amd,intel,nvidia,amd,intel", "split-rail", RING0, RAIL_AR_LIGHT),
    # eight ranks: four rails, and three of them (slices that do not divide evenly)
    ("nvidia:4,amd:4", "split-rail", RING0, RAIL_AR_LIGHT),
    ("nvidia:4,amd:4", "split-rail", rails(RING0, 3), RAIL_AR_LIGHT),
]

JOB_TIMEOUT = 300  # seconds for one job, launcher included
# Logged by every rank for the refused avg calls of --avg-int-check: expected noise.
NOISE = "avg needs a floating-point type"


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    if "--list" in sys.argv:
        for i, j in enumerate(JOBS):
            print(i, j[0], j[1], j[2])
        return
    harness.require_built("rank_matrix")
    suite = harness.Suite("matrix")
    for i, (vendors, policy, (chunk, ring, nrails), cases) in enumerate(JOBS):
        label = "job %d: n=%d %s policy %s chunk %s ring-min %s%s" % (
            i, len(harness.vendor_list(vendors)), vendors, policy, chunk, ring,
            (" rails " + nrails) if nrails else "")
        if only and only not in label:
            continue
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_CHUNK_BYTES=chunk,
                                GPUBRIDGE_RING_MIN_BYTES=ring, GPUBRIDGE_RAILS=nrails, GPUBRIDGE_TIMEOUT=60)
        args = [harness.program("rank_matrix"), "--layout", ",".join(ranks), "--seed", str(2000 + i),
                "--avg-int-check"] + cases
        res = harness.run_job(n, args, env, vendors=vendors, launcher_timeout=JOB_TIMEOUT - 20,
                              timeout=JOB_TIMEOUT)
        lines = res.lines()
        oks = {r: [l for l in ls if l.startswith("ok:")] for r, ls in lines.items()}
        missing = [r for r in range(n) if not oks.get(r)]
        fails = [("[%d] " % r) + l for r, ls in sorted(lines.items()) for l in ls if "FAIL" in l]
        summary = ""
        if oks.get(0):
            # "ok: rank 0 of 4, 2 islands, policy hierarchical, 512 allreduce, ... cases passed in 6.2 s"
            summary = oks[0][0].split(", ", 2)[-1]
        print("%s: rc %d, %.1f s%s" % (label, res.rc, res.elapsed, (": " + summary) if summary else ""),
              flush=True)
        suite.check(res.rc == 0 and not missing and not res.timed_out, label,
                    "rc %s%s; ranks without ok: %s\n%s\n%s" % (
                        res.rc, " (driver timeout)" if res.timed_out else "", missing,
                        "\n".join(fails[:8]),
                        "\n".join(l for l in res.tail(400).splitlines() if NOISE not in l)[-6000:]))
    suite.done()


if __name__ == "__main__":
    main()
