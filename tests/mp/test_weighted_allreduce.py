"""The weighted average in C (docs/REDUCTION_ORDER.md, "Weighted average"):
each job runs tests/rank_weighted_allreduce, whose ranks have unequal
weights (5, 11, 16, 3, ...), all-reduce them to W, then all-reduce float32,
float64, float16 and bfloat16 buffers (1, 1000 and 33000 elements) with a
PreMulSum op of scalar w_r / W, and compare bit for bit with the documented
order computed for every rank, and (float32, float64) with the exact
weighted mean within (n + 2) u (u: the unit roundoff). Layouts and
policies: hierarchical with unequal islands, flat, split-rail, native,
three islands.

    python3 tests/mp/test_weighted_allreduce.py [--only SUBSTRING]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SMALL = ("64K", "4K")      # chunks and rings inside 33000 elements
EXCHANGE = ("1M", "1G")    # one chunk, exchange order
RING0 = ("4K", "0")        # rings everywhere n >= 3

JOBS = [
    ("nvidia:2,amd:1", "auto", SMALL),
    ("nvidia:2,amd:2", "flat", RING0),
    ("nvidia:2,amd:2", "split-rail", SMALL),
    ("amd:3", "native", EXCHANGE),
    ("nvidia:2,amd:2,intel:1", "hierarchical", RING0),
]
JOB_TIMEOUT = 120


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    harness.require_built("rank_weighted_allreduce")
    suite = harness.Suite("weighted_allreduce")
    for i, (vendors, policy, (chunk, ring)) in enumerate(JOBS):
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        label = "job %d: n=%d %s policy %s chunk %s ring-min %s" % (i, n, vendors, policy, chunk, ring)
        if only and only not in label:
            continue
        env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_CHUNK_BYTES=chunk,
                                GPUBRIDGE_RING_MIN_BYTES=ring, GPUBRIDGE_TIMEOUT=60)
        args = [harness.program("rank_weighted_allreduce"), "--layout", ",".join(ranks)]
        res = harness.run_job(n, args, env, vendors=vendors, launcher_timeout=JOB_TIMEOUT - 20,
                              timeout=JOB_TIMEOUT)
        harness.check_every_rank_ok(suite, res, n, label)
    suite.done()


if __name__ == "__main__":
    main()
