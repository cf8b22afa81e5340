"""Bridge compression (GPUBRIDGE_BRIDGE_COMPRESSION, docs/REDUCTION_ORDER.md
"Bridge compression") on every path a bridged reduction takes: shared slots
on one host, the private stage over the host transport
(GPUBRIDGE_BRIDGE_SLOTS=off), remote slots across simulated hosts, under
flat, hierarchical and split-rail. Each job runs tests/rank_compression
(all-reduce and reduce-scatter, sum and avg; fp8 also float16 and
bfloat16): every element within the documented bound of the exact sum, inf
and NaN kept, the wire seen to narrow; then every rank's all-reduce results
must have the same hash (the same bits on every rank).

    python3 tests/mp/test_compression.py [--only SUBSTRING]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def sim_hosts(args):
    """Each rank its own simulated host: the bridge takes remote slots."""
    return ["sh", "-c", 'export GPUBRIDGE_SIM_HOST=h$RANK; exec "$@"', "sh"] + args


# (vendors, policy, bridge slots, wire, own hosts)
JOBS = [
    ("nvidia:1,amd:1", "auto", "auto", "bf16", False),
    ("nvidia:1,amd:1", "auto", "auto", "fp8", False),
    ("nvidia:2,amd:2", "hierarchical", "off", "fp8", False),
    ("nvidia:2,amd:2", "split-rail", "auto", "bf16", False),
    ("nvidia:2,amd:1", "flat", "off", "bf16", False),
    ("nvidia:1,amd:1", "auto", "auto", "fp8", True),
]
JOB_TIMEOUT = 150


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    harness.require_built("rank_compression")
    suite = harness.Suite("compression")
    for i, (vendors, policy, slots, wire, hosts) in enumerate(JOBS):
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        label = "job %d: n=%d %s policy %s slots %s wire %s%s" % (i, n, vendors, policy, slots, wire,
                                                                  " on own hosts" if hosts else "")
        if only and only not in label:
            continue
        env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_BRIDGE_SLOTS=slots, GPUBRIDGE_CHUNK_BYTES="64K",
                                GPUBRIDGE_EXCHANGE="off", GPUBRIDGE_BRIDGE_COMPRESSION=wire, GPUBRIDGE_TIMEOUT=60)
        args = [harness.program("rank_compression"), "--layout", ",".join(ranks), "--wire", wire]
        res = harness.run_job(n, sim_hosts(args) if hosts else args, env, vendors=vendors,
                              launcher_timeout=JOB_TIMEOUT - 20, timeout=JOB_TIMEOUT)
        harness.check_every_rank_ok(suite, res, n, label)
        hashes = {}
        for r, lines in res.lines().items():
            for line in lines:
                m = re.match(r"hash (\d+) all ([0-9a-f]+)$", line)
                if m:
                    hashes.setdefault(int(m.group(1)), {})[r] = m.group(2)
        same = all(len(set(by_rank.values())) == 1 and len(by_rank) == n for by_rank in hashes.values())
        suite.check(bool(hashes) and same, label + ": every rank's all-reduce results have the same bits",
                    "hashes by case and rank: %s" % hashes)
    suite.done()


if __name__ == "__main__":
    main()
