"""Leak loops: hundreds of init/destroy cycles in one process, with open
descriptors, threads, /dev/shm segments and memory checked flat.

    python3 tests/mp/test_leak_loops.py [--cycles 200] [--warm 20] [--ops 1000]
        [--only MODE] [--heap-bound-kib 256] [--rss-bound-mib 24]

Each job runs rank_leaks (rank_leaks.c) under gpubridge-run in one mode:
plain init/destroy, init + collectives + destroy, init + all-reduce + abort,
a failed init (settings disagree), split + destroy of the child, PreMulSum
create/destroy churn (--ops per cycle). Every rank measures itself after
--warm cycles and after the last: descriptors, threads and its own
/dev/shm segments must be equal, the heap in use (mallinfo2, all arenas)
may grow by at most --heap-bound-kib, anonymous resident memory by at most
--rss-bound-mib (the allocator keeps freed pages of its thread arenas, in
4 MiB steps; a buffer leaked per cycle would exceed it many times over),
and the number of mappings must be equal. After
each job no segment of its ranks may be named in /dev/shm and no process
of it may be alive.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

# The sanitizers' allocators map regions of their own (ASan also holds freed
# blocks in quarantine; TSan maps shadow for each new large block's address):
# mappings and resident memory are checked in the plain build, leaks under ASan
# by LSan.
SANITIZER = os.path.basename(harness.sanitizer_runtime() or "").split(".")[0]

# (mode, vendors): world sizes 2..4, one and two islands
JOBS = [
    ("plain", "nvidia:1,amd:1"),
    ("plain", "nvidia:2,amd:2"),
    ("collectives", "nvidia:2,amd:1"),
    ("abort", "nvidia:1,amd:1"),
    ("abort", "nvidia:2,amd:2"),
    ("failinit", "nvidia:2,amd:1"),
    ("split", "nvidia:2,amd:2"),
    ("premul", "nvidia:1,amd:1"),
]

# glibc makes a new arena (two mappings) for a new thread now and then, up to
# 8 per core: not a leak.
MAPS_SLACK = 8

_MEAS = re.compile(r"^leaks (\S+): warm fds (-?\d+) threads (-?\d+) shm (-?\d+) rss (-?\d+) KiB heap (-?\d+) KiB "
                   r"maps (-?\d+); last fds (-?\d+) threads (-?\d+) shm (-?\d+) rss (-?\d+) KiB heap (-?\d+) KiB "
                   r"maps (-?\d+)$")


def run_job(suite, mode, vendors, cycles, warm, ops, heap_bound, rss_bound):
    n = len(harness.vendor_list(vendors))
    name = "%s n=%d (%s)" % (mode, n, vendors)
    tag = trials.new_tag()
    watch = trials.PidWatch(tag)
    env = trials.tagged_env(tag, GPUBRIDGE_TIMEOUT=20)
    cmd = harness.launch_cmd(n, [harness.program("rank_leaks"), "--mode", mode, "--cycles", str(cycles),
                                 "--warm", str(warm), "--ops", str(ops)], vendors, timeout=600)
    job = harness.LiveJob(cmd, env)
    try:
        job.wait_for(lambda L: len(watch.poll()) >= n, 60)
        res = job.finish(620)
    finally:
        trials.kill_tagged(tag)
    lines = res.lines()
    # A rank's own FAIL line first: the abort modes flood the tail with warnings.
    fails = [l for l in (res.out + "\n" + res.err).splitlines() if "FAIL" in l]
    detail = "rc %s, %.1f s\n%s\n%s" % (res.rc, res.elapsed, "\n".join(fails[:10]), res.tail(40))
    print("%s: rc %s, %.1f s" % (name, res.rc, res.elapsed), flush=True)
    oks = [r for r in range(n) if any(l.startswith("ok:") for l in lines.get(r, []))]
    suite.check(res.rc == 0 and not res.timed_out and oks == list(range(n)),
                "%s: %d cycles pass on every rank" % (name, cycles), detail)
    for r in range(n):
        m = next((_MEAS.match(l) for l in lines.get(r, []) if _MEAS.match(l)), None)
        if m is None:
            continue
        w, e = [int(x) for x in m.groups()[1:7]], [int(x) for x in m.groups()[7:]]
        what = "%s rank %d" % (name, r)
        print("  [%d] warm fds %d threads %d shm %d rss %d KiB heap %d KiB maps %d; last fds %d threads %d shm %d "
              "rss %d KiB heap %d KiB maps %d" % tuple([r] + w + e))
        suite.check(e[0] == w[0], "%s: open descriptors flat (%d after %d cycles, %d after %d)"
                    % (what, w[0], warm, e[0], cycles))
        suite.check(e[1] == w[1], "%s: threads flat (%d, %d)" % (what, w[1], e[1]))
        suite.check(e[2] == w[2] == 0, "%s: no /dev/shm segment of its own stays named (%d, %d)" % (what, w[2], e[2]))
        suite.check(e[4] - w[4] <= heap_bound, "%s: heap in use grew %d KiB over %d cycles (bound %d KiB)"
                    % (what, e[4] - w[4], cycles - warm, heap_bound))
        if SANITIZER:
            print("%s: mappings %d -> %d, resident memory grew %d KiB (not checked under %s)"
                  % (what, w[5], e[5], e[3] - w[3], SANITIZER))
        else:
            suite.check(e[5] - w[5] <= MAPS_SLACK, "%s: memory mappings flat (%d, %d; slack %d for allocator arenas)"
                        % (what, w[5], e[5], MAPS_SLACK))
            suite.check(e[3] - w[3] <= rss_bound, "%s: resident memory grew %d KiB (bound %d KiB)"
                        % (what, e[3] - w[3], rss_bound))
    left = trials.shm_of(watch.pids())
    suite.check(not left, "%s: no /dev/shm/gpubridge-* segment of its ranks is left" % name, "%s" % left)
    trials.remove_shm(left)
    alive = trials.survivors(tag)
    suite.check(not alive, "%s: no process of the job survives it" % name, "%s" % alive)


def main():
    cycles = trials.arg("cycles", 200, int)
    warm = trials.arg("warm", 20, int)
    ops = trials.arg("ops", 1000, int)
    only = trials.arg("only", None)
    heap_bound = trials.arg("heap-bound-kib", 256, int)
    rss_bound = trials.arg("rss-bound-mib", 24, int) * 1024
    harness.require_built("rank_leaks")
    suite = harness.Suite("leak loops")
    for mode, vendors in JOBS:
        if not only or only in mode:
            run_job(suite, mode, vendors, cycles, warm, ops, heap_bound, rss_bound)
    suite.done()


if __name__ == "__main__":
    main()
