"""Soak: minutes of mixed collectives with checked results and flat memory.

    python3 tests/mp/test_soak.py [--minutes M | --seconds S] [--seed N]
        [--layout nvidia:2,amd:2] [--policy hierarchical] [--max-count 40000]
        [--rss-bound-mib 24] [--heap-bound-kib 512]

One job of rank_soak (rank_soak.c): all-reduce (every dtype and op, the
expected bits from the documented reduction order), broadcast, reduce,
all-gather, reduce-scatter, all-to-all, send/recv rings and splits, chosen
by the seed, every result compared bit for bit on every rank. Each rank
measures itself once half the time has passed and at the end: descriptors,
threads, mappings and its /dev/shm segments must be equal; the heap in
use and anonymous resident memory may grow by at most the stated bounds. In CI it runs 60 s.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

ASAN = "libasan" in (harness.sanitizer_runtime() or "")

# glibc makes a new arena (two mappings) for a new thread now and then, up to
# 8 per core: not a leak.
MAPS_SLACK = 8

_MEM = re.compile(r"^mem: warm fds (\d+) threads (\d+) shm (\d+) rss (\d+) KiB heap (\d+) KiB maps (\d+); "
                  r"last fds (\d+) threads (\d+) shm (\d+) rss (\d+) KiB heap (\d+) KiB maps (\d+)$")
_OK = re.compile(r"^ok: rank (\d+): (\d+) operations \((.*)\) checked")


def main():
    seconds = trials.arg("seconds", None, float)
    if seconds is None:
        seconds = 60.0 * trials.arg("minutes", 1.0, float)
    layout_spec = trials.arg("layout", "nvidia:2,amd:2")
    policy = trials.arg("policy", "hierarchical")
    max_count = trials.arg("max-count", 40000, int)
    rss_bound = trials.arg("rss-bound-mib", 24.0, float) * 1024
    heap_bound = trials.arg("heap-bound-kib", 512.0, float)
    harness.require_built("rank_soak")
    suite = harness.Suite("soak")
    seed = trials.seeded("soak")
    vendors = harness.vendor_list(layout_spec)
    n = len(vendors)
    tag = trials.new_tag()
    env = trials.tagged_env(tag, GPUBRIDGE_TIMEOUT=30, GPUBRIDGE_CHUNK_BYTES="64K",
                            GPUBRIDGE_RING_MIN_BYTES="4K", GPUBRIDGE_POLICY=policy)
    watch = trials.PidWatch(tag)
    cmd = harness.launch_cmd(n, [harness.program("rank_soak"), "--layout", ",".join(vendors), "--seconds",
                                 str(seconds), "--seed", str(seed), "--max-count", str(max_count),
                                 "--warm-fraction", "0.5"],
                             layout_spec, timeout=int(seconds) + 120)
    print("soak: %d ranks (%s), policy %s, %.0f s" % (n, layout_spec, policy, seconds), flush=True)
    job = harness.LiveJob(cmd, env)
    try:
        job.wait_for(lambda L: len(watch.poll()) >= n, 60)
        res = job.finish(seconds + 100)
    finally:
        trials.kill_tagged(tag)
    lines = res.lines()
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail(60))
    oks = {}
    for r in range(n):
        for l in lines.get(r, []):
            m = _OK.match(l)
            if m:
                oks[r] = (int(m.group(2)), m.group(3))
    for r in range(n):
        print("[%d] %s" % (r, next((l for l in lines.get(r, []) if l.startswith("ok:")), "(no ok line)")))
    suite.check(res.rc == 0 and not res.timed_out and sorted(oks) == list(range(n)),
                "every rank checks every result and exits 0", detail)
    suite.check(len(set(v[0] for v in oks.values())) <= 1, "every rank ran the same operations",
                "%s" % oks)
    if oks:
        total = next(iter(oks.values()))[0]
        suite.check(total >= 10, "the soak ran at least 10 operations (%d)" % total, detail)
    for r in range(n):
        m = next((_MEM.match(l) for l in lines.get(r, []) if _MEM.match(l)), None)
        if not suite.check(m is not None, "rank %d reports its measures" % r, detail):
            continue
        w, e = [int(x) for x in m.groups()[:6]], [int(x) for x in m.groups()[6:]]
        print("[%d] warm fds %d threads %d shm %d rss %d KiB heap %d KiB maps %d; last fds %d threads %d "
              "shm %d rss %d KiB heap %d KiB maps %d" % tuple([r] + w + e))
        # A leak grows; one fewer at the end is a connection that was in flight at the warm-up measure (a
        # stranger waiting in the listener's table, CI's other suites share the ports), never one held.
        suite.check(e[0] <= w[0], "rank %d: descriptors did not grow (%d -> %d)" % (r, w[0], e[0]))
        suite.check(e[1] <= w[1], "rank %d: threads did not grow (%d -> %d)" % (r, w[1], e[1]))
        suite.check(e[2] == 0 and w[2] == 0, "rank %d: no /dev/shm segment of its own stays named (%d, %d)"
                    % (r, w[2], e[2]))
        if ASAN:  # ASan's allocator maps regions and holds freed blocks (quarantine): LSan checks leaks instead
            print("rank %d: mappings %d -> %d, resident memory grew %d KiB (not checked under ASan)"
                  % (r, w[5], e[5], e[3] - w[3]))
        else:
            suite.check(e[5] - w[5] <= MAPS_SLACK, "rank %d: memory mappings flat (%d -> %d, slack %d for allocator "
                        "arenas)" % (r, w[5], e[5], MAPS_SLACK))
            suite.check(e[3] - w[3] <= rss_bound, "rank %d: resident memory grew %d KiB (bound %d KiB)"
                        % (r, e[3] - w[3], rss_bound))
        suite.check(e[4] - w[4] <= heap_bound, "rank %d: heap grew %d KiB (bound %d KiB)"
                    % (r, e[4] - w[4], heap_bound))
    left = trials.shm_of(watch.pids())
    suite.check(not left, "no /dev/shm/gpubridge-* segment of the job's ranks is left", "%s" % left)
    trials.remove_shm(left)
    alive = trials.survivors(tag)
    suite.check(not alive, "no process of the job survives it", "%s" % alive)
    suite.done()


if __name__ == "__main__":
    main()
