"""gbCommSplit: children by vendor, by parity, by halves and whole-world
reversals; NOCOLOR ranks; a split of a split; keys that reverse or tie; a
split config; and destruction in every order of {parent, child} and in all
six orders of {parent, child, grandchild}, each in its own job.

Each job runs tests/rank_split under gpubridge-run. Every rank computes the
members of its child (color, then key, ties by parent rank) and the child's
topology from the layout, checks size, rank and gbCommGetTopology, runs
collectives on every level interleaved (all-reduce int32 and float32,
broadcast, reduce, all-gather, reduce-scatter) with expected values computed
from integer inputs, and keeps the survivors working after each destroy.
The driver checks that every rank reported "ok".

    python3 tests/mp/test_split.py [--only SUBSTRING] [--list]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BLOCKS3 = "nvidia:2,amd:2,intel:2"                 # three islands in blocks
INTER3 = "nvidia,amd,intel,nvidia,amd,intel"       # three islands interleaved
TWO = "nvidia:2,amd:2"

SMALL_CHUNKS = {"GPUBRIDGE_CHUNK_BYTES": "16K", "GPUBRIDGE_RING_MIN_BYTES": "4K"}

# (vendors, rank_split arguments, extra environment)
JOBS = [
    # by vendor (color = island): one-vendor children run native
    (BLOCKS3, ["--split", "island", "--destroy", "0,1"], {}),
    (BLOCKS3, ["--split", "island", "--destroy", "1,0", "--batch"], SMALL_CHUNKS),
    (INTER3, ["--split", "island,key=reverse", "--destroy", "1,0"], {}),
    (INTER3, ["--split", "island", "--destroy", "0,1", "--batch"], SMALL_CHUNKS),
    (TWO, ["--split", "island,key=reverse", "--destroy", "1,0"], {}),
    # by parity: mixed children bridge three islands
    (BLOCKS3, ["--split", "parity", "--destroy", "1,0"], SMALL_CHUNKS),
    (INTER3, ["--split", "parity", "--destroy", "0,1", "--batch"], {}),
    (BLOCKS3, ["--split", "parity,key=pairs,nocolor=0+3", "--destroy", "0,1"], {}),
    (INTER3, ["--split", "parity,key=neg,nocolor=5", "--destroy", "1,0", "--batch"], SMALL_CHUNKS),
    # halves; one color for all with reversed keys (the islands' order changes)
    (BLOCKS3, ["--split", "half,key=neg", "--destroy", "0,1"], {}),
    (INTER3, ["--split", "same,key=reverse", "--destroy", "1,0", "--batch"], SMALL_CHUNKS),
    # settings: a config given to the split; a parent's policy (from the environment,
    # or from the parent's own config while the environment says nothing) inherited
    (BLOCKS3, ["--split", "same,key=reverse", "--config-policy", "flat", "--destroy", "1,0"], {}),
    (BLOCKS3, ["--split", "island", "--config-policy", "hierarchical", "--destroy", "0,1"], {}),
    (BLOCKS3, ["--split", "island", "--destroy", "0,1"], {"GPUBRIDGE_POLICY": "flat"}),
    (BLOCKS3, ["--world-policy", "flat", "--split", "island", "--destroy", "1,0"], {}),
    (INTER3, ["--world-policy", "flat", "--split", "parity", "--split", "island", "--destroy", "0,1,2"], {}),
    (INTER3, ["--split", "parity", "--destroy", "1,0"], {"GPUBRIDGE_POLICY": "hierarchical"}),
    # a split of a split, in all six destruction orders
    (BLOCKS3, ["--split", "parity", "--split", "island", "--destroy", "0,1,2"], {}),
    (INTER3, ["--split", "parity,key=reverse", "--split", "island", "--destroy", "0,2,1"], SMALL_CHUNKS),
    (BLOCKS3, ["--split", "island", "--split", "parity", "--destroy", "1,0,2"], {}),
    (INTER3, ["--split", "half", "--split", "parity,key=reverse", "--destroy", "1,2,0", "--batch"], {}),
    (BLOCKS3, ["--split", "same,key=reverse", "--split", "half,nocolor=1", "--destroy", "2,0,1"], SMALL_CHUNKS),
    (TWO, ["--split", "parity", "--split", "same,key=reverse", "--destroy", "2,1,0", "--batch"], {}),
    (BLOCKS3, ["--split", "parity,nocolor=2", "--split", "island", "--destroy", "2,1,0"], {}),
]

JOB_TIMEOUT = 240  # seconds for one job, launcher included


def label_of(i, vendors, args, extra):
    env = " ".join("%s=%s" % (k.replace("GPUBRIDGE_", ""), v) for k, v in sorted(extra.items()))
    return "job %d: %s %s%s" % (i, vendors, " ".join(args), (" " + env) if env else "")


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    if "--list" in sys.argv:
        for i, j in enumerate(JOBS):
            print(label_of(i, *j))
        return
    harness.require_built("rank_split")
    suite = harness.Suite("split")
    for i, (vendors, args, extra) in enumerate(JOBS):
        label = label_of(i, vendors, args, extra)
        if only and only not in label:
            continue
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        env = harness.clean_env(GPUBRIDGE_TIMEOUT=60, **extra)
        cmd = [harness.program("rank_split"), "--layout", ",".join(ranks)] + args
        res = harness.run_job(n, cmd, env, vendors=vendors, launcher_timeout=JOB_TIMEOUT - 20, timeout=JOB_TIMEOUT)
        lines = res.lines()
        oks = {r: [l for l in ls if l.startswith("ok:")] for r, ls in lines.items()}
        missing = [r for r in range(n) if not oks.get(r)]
        fails = ["[%d] %s" % (r, l) for r, ls in sorted(lines.items()) for l in ls if "FAIL" in l]
        print("%s: rc %d, %.1f s" % (label, res.rc, res.elapsed), flush=True)
        for r in range(n):
            for l in lines.get(r, []):
                if l.startswith("split "):
                    print("  [%d] %s" % (r, l))
        suite.check(res.rc == 0 and not missing and not fails and not res.timed_out, label,
                    "rc %s%s; ranks without ok: %s\n%s\n%s" % (
                        res.rc, " (driver timeout)" if res.timed_out else "", missing,
                        "\n".join(fails[:8]), res.tail()))
    suite.done()


if __name__ == "__main__":
    main()
