"""The collectives matrix: world sizes 1..8, island layouts, policies, counts,
every dtype and op, in and out of place, broadcast from several roots.

Each job runs tests/rank_collectives under gpubridge-run; every rank computes
the expected bits itself (from the documented reduction order) and compares
bit for bit. The driver checks that every rank reported "ok" and prints one
summary line per job.

    python3 tests/mp/test_collectives.py [--only SUBSTRING] [--list]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BIG = 2 ** 20 + 3
# Crosses 64 KiB chunks for 2-, 4- and 8-byte types, and leaves a last chunk
# below a 4 KiB ring threshold (33000 - 2 * 16384 = 232 float32).
MEDIUM = 33000

# (chunk bytes, ring threshold bytes)
SMALL = ("64K", "4K")         # chunk pipeline, ring and exchange per chunk
DEFAULTS = ("1M", "64K")      # the library's defaults, set explicitly
RING0 = ("4K", "0")           # ring everywhere n >= 3, even for 1 element (empty slices)
EXCHANGE = ("256K", "1G")     # exchange order everywhere

# Case sets (rank_collectives arguments).
FULL = ["--allreduce", "0,1,7,%d:all:all:oi" % MEDIUM,
        "--broadcast", "0,1,7,%d:all:0,1,-1:oi" % MEDIUM]
LIGHT = ["--allreduce", "0,1,7,%d:int8,uint32,int64,float16,float32,float64,bfloat16:all:oi" % MEDIUM,
         "--broadcast", "7,%d:float32,int8:0,-1:oi" % MEDIUM]
TINY = ["--allreduce", "1,7,1000:float16,bfloat16,float32,uint8:sum,prod,max,avg:oi",
        "--broadcast", "7:float64:-1:i"]
BIG_F = ["--allreduce", "%d:float32,bfloat16:sum,avg:o" % BIG]
BIG_MIX = ["--allreduce", "%d:float16,int64:prod,min:i" % BIG,
           "--allreduce", "%d:float64:sum:o" % BIG]
BIG_BC = ["--broadcast", "%d:float32:-1:oi" % BIG]

# (vendors, policy, settings, cases)
JOBS = [
    # world size 1
    ("nvidia:1", "auto", SMALL, FULL + BIG_F),
    ("amd:1", "flat", SMALL, LIGHT),
    ("nvidia:1", "hierarchical", DEFAULTS, LIGHT),
    ("nvidia:1", "native", SMALL, TINY),
    # 2
    ("nvidia:2", "auto", SMALL, FULL),
    ("nvidia:1,amd:1", "auto", SMALL, FULL),
    ("amd:1,nvidia:1", "flat", DEFAULTS, FULL + BIG_F),
    ("nvidia:2", "hierarchical", SMALL, LIGHT),
    # 3
    ("nvidia:1,amd:2", "auto", SMALL, FULL + BIG_F),
    ("nvidia:3", "native", SMALL, FULL),
    ("amd:2,nvidia:1", "hierarchical", RING0, FULL),
    ("nvidia:3", "flat", RING0, LIGHT),
    ("nvidia:1,amd:1,intel:1", "auto", SMALL, FULL),
    # 4
    ("nvidia:2,amd:2", "auto", SMALL, FULL),
    ("nvidia:2,amd:2", "auto", DEFAULTS, TINY + BIG_F + BIG_MIX + BIG_BC),
    ("nvidia,amd,nvidia,amd", "auto", SMALL, FULL),
    ("amd,nvidia,nvidia,amd", "hierarchical", EXCHANGE, FULL),
    ("nvidia:2,amd:2", "flat", SMALL, FULL),
    ("nvidia:4", "hierarchical", SMALL, LIGHT),
    ("nvidia:4", "auto", RING0, LIGHT),
    # 5
    ("nvidia:2,amd:2,intel:1", "auto", SMALL, FULL),
    ("nvidia:2,amd:2,intel:1", "flat", RING0, LIGHT),
    ("amd:5", "native", DEFAULTS, LIGHT + BIG_F + BIG_MIX),
    ("intel,nvidia,amd,nvidia,amd", "hierarchical", SMALL, FULL),
    # 6
    ("nvidia,amd,intel,nvidia,amd,intel", "auto", SMALL, FULL),
    ("nvidia:3,amd:3", "hierarchical", DEFAULTS, LIGHT + BIG_F),
    ("nvidia:1,amd:5", "auto", RING0, LIGHT),
    # 7
    ("nvidia:4,amd:3", "auto", SMALL, FULL),
    ("intel:1,nvidia:3,amd:3", "flat", SMALL, LIGHT),
    ("nvidia:7", "native", RING0, LIGHT),
    # 8
    ("nvidia:3,amd:5", "auto", SMALL, FULL),
    ("nvidia:3,amd:5", "auto", DEFAULTS, TINY + BIG_F + BIG_MIX + BIG_BC),
    ("nvidia:4,amd:4", "flat", DEFAULTS, TINY + BIG_F),
    ("nvidia:8", "native", SMALL, FULL),
    ("nvidia:3,amd:3,intel:2", "hierarchical", SMALL, FULL),
    ("amd,nvidia,amd,nvidia,amd,nvidia,amd,nvidia", "auto", EXCHANGE, LIGHT),
    ("nvidia,amd,intel,nvidia,amd,intel,nvidia,amd", "auto", RING0, LIGHT),
]

JOB_TIMEOUT = 240  # seconds for one job, launcher included


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    if "--list" in sys.argv:
        for i, j in enumerate(JOBS):
            print(i, j[0], j[1], j[2])
        return
    harness.require_built("rank_collectives")
    suite = harness.Suite("collectives")
    for i, (vendors, policy, (chunk, ring), cases) in enumerate(JOBS):
        label = "job %d: n=%d %s policy %s chunk %s ring-min %s" % (
            i, len(harness.vendor_list(vendors)), vendors, policy, chunk, ring)
        if only and only not in label:
            continue
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_CHUNK_BYTES=chunk,
                                GPUBRIDGE_RING_MIN_BYTES=ring, GPUBRIDGE_TIMEOUT=60)
        args = [harness.program("rank_collectives"), "--layout", ",".join(ranks), "--seed", str(1000 + i),
                "--avg-int-check"] + cases
        res = harness.run_job(n, args, env, vendors=vendors, launcher_timeout=JOB_TIMEOUT - 20,
                              timeout=JOB_TIMEOUT)
        harness.check_every_rank_ok(suite, res, n, label)
    suite.done()


if __name__ == "__main__":
    main()
