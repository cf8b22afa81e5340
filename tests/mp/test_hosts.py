"""Islands on separate hosts: the emulated hosts of tests/mp/hosts.py
(network namespaces joined by veth pairs to a switch; every host's
interface is gb0), so the bridge, and islands that span hosts, cross a
network instead of loopback or shared memory.

- The collective matrix (tests/rank_matrix, test_matrix.py's case sets) with
  each island on its own host under every policy, and with every rank on a
  host of its own (islands spanning hosts, over TCP alone); every rank checks
  the bits itself.
- Interface selection: GPUBRIDGE_SOCKET_IFNAME=gb0 makes every rank listen on
  its host's address (the log says which); an interface no host has fails on
  every rank with a message naming it.
- The link cut mid-collective: a soak (tests/rank_soak) runs across two hosts,
  the driver cuts host 1's link once both hosts have sent 16 MB over it (the
  soak's collectives are crossing it); every rank ends
  with an error within GPUBRIDGE_TIMEOUT + 3 s, the launcher ends, and no
  process or /dev/shm segment of the job is left.

    python3 tests/mp/test_hosts.py [--only SUBSTRING]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import hosts  # noqa: E402
import test_matrix as M  # noqa: E402
import trials  # noqa: E402

TIMEOUT = round(harness.scaled(3))  # GPUBRIDGE_TIMEOUT of the cut
CROSSED = 16 << 20  # bytes each host sends over the link before it is cut
# (hosts, placement, vendors, policy, settings, cases)
MATRIX = [
    (2, [0, 0, 1, 1], "nvidia:2,amd:2", "hierarchical", M.DEFAULTS, M.NEW_LIGHT + M.BIG_NEW),
    (2, [0, 0, 1, 1], "nvidia:2,amd:2", "flat", M.RING0, M.NEW_LIGHT),
    (2, [0, 0, 1, 1], "nvidia:2,amd:2", "split-rail", M.RING0, M.RAIL_AR + M.NEW_LIGHT),
    (2, [0, 1, 1], "nvidia:1,amd:2", "auto", M.SMALL, M.NEW_LIGHT),
    (3, [0, 1, 1, 2, 2], "nvidia:1,amd:2,intel:2", "auto", M.SMALL, M.NEW_LIGHT),
    (4, [0, 1, 2, 3], "nvidia,amd,nvidia,amd", "auto", M.SMALL, M.NEW_LIGHT),
]


def matrix(suite, only):
    for i, (nh, placement, vendors, policy, (chunk, ring, nrails), cases) in enumerate(MATRIX):
        label = "matrix %d: %s on %d hosts (ranks on hosts %s), policy %s" % (
            i, vendors, nh, ",".join(map(str, placement)), policy)
        if only and only not in label:
            continue
        rig = hosts.Rig(nh).up()
        try:
            ranks = harness.vendor_list(vendors)
            env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_CHUNK_BYTES=chunk, GPUBRIDGE_RING_MIN_BYTES=ring,
                                    GPUBRIDGE_RAILS=nrails, GPUBRIDGE_TIMEOUT=60, GPUBRIDGE_SOCKET_IFNAME=hosts.IFNAME)
            args = [rig.place(placement), harness.program("rank_matrix"), "--layout", ",".join(ranks),
                    "--seed", str(3000 + i), "--avg-int-check"] + cases
            res = harness.run_job(len(ranks), args, env, vendors=vendors, launcher_timeout=240, timeout=260)
        finally:
            rig.down()
        lines = res.lines()
        missing = [r for r in range(len(ranks)) if not any(l.startswith("ok:") for l in lines.get(r, []))]
        print("%s: rc %d, %.1f s" % (label, res.rc, res.elapsed), flush=True)
        suite.check(res.rc == 0 and not missing and not res.timed_out, label,
                    "rc %s; ranks without ok: %s\n%s" % (res.rc, missing, "\n".join(
                        l for l in res.tail(60).splitlines() if M.NOISE not in l)))
        suite.check(not rig.left(), "%s: the rig's namespaces are gone" % label, "left: %s" % rig.left())


def interfaces(suite, only):
    if only and only not in "interfaces":
        return
    rig = hosts.Rig(2).up()
    try:
        wrapper = rig.place([0, 0, 1, 1])
        args = [wrapper, harness.program("rank_matrix"), "--layout", "nvidia,nvidia,amd,amd", "--seed", "1",
                "--allreduce", "7:float32:sum:o"]
        env = harness.clean_env(GPUBRIDGE_POLICY="hierarchical", GPUBRIDGE_CHUNK_BYTES="1M",
                                GPUBRIDGE_RING_MIN_BYTES="64K", GPUBRIDGE_TIMEOUT=30,
                                GPUBRIDGE_SOCKET_IFNAME=hosts.IFNAME, GPUBRIDGE_DEBUG="INFO",
                                GPUBRIDGE_DEBUG_SUBSYS="NET")
        res = harness.run_job(4, args, env, vendors="nvidia:2,amd:2", launcher_timeout=60, timeout=80)
        lines = res.lines()
        for r, host in enumerate([0, 0, 1, 1]):
            want = "listening for peers on %s:" % rig.addrs[host]
            suite.check(any(want in l for l in lines.get(r, [])),
                        "GPUBRIDGE_SOCKET_IFNAME=gb0: rank %d listens on its host's address %s" % (r, rig.addrs[host]),
                        "\n".join(lines.get(r, [])[-10:]))
        suite.check(res.rc == 0, "GPUBRIDGE_SOCKET_IFNAME=gb0: the job passes", res.tail(20))
        env = harness.clean_env(GPUBRIDGE_POLICY="hierarchical", GPUBRIDGE_CHUNK_BYTES="1M",
                                GPUBRIDGE_RING_MIN_BYTES="64K", GPUBRIDGE_TIMEOUT=30, GPUBRIDGE_SOCKET_IFNAME="=ib7")
        res = harness.run_job(4, args, env, vendors="nvidia:2,amd:2", keep_going=True, launcher_timeout=60, timeout=80)
        lines = res.lines()
        for r in range(4):
            named = [l for l in lines.get(r, []) if "FAIL" in l and "ib7" in l]
            suite.check(named, "GPUBRIDGE_SOCKET_IFNAME=ib7 (no such interface): rank %d fails naming it" % r,
                        "\n".join(lines.get(r, [])[-6:]))
        suite.check(res.rc != 0 and res.elapsed < 20, "GPUBRIDGE_SOCKET_IFNAME=ib7: the job fails at once",
                    "rc %s after %.1f s" % (res.rc, res.elapsed))
    finally:
        rig.down()


def cut(suite, only):
    if only and only not in "cut":
        return
    name = "the link to host 1 cut mid-collective"
    rig = hosts.Rig(2).up()
    tag = trials.new_tag()
    watch = trials.PidWatch(tag)
    try:
        args = [rig.place([0, 0, 1, 1]), harness.program("rank_soak"), "--layout", "nvidia,nvidia,amd,amd",
                "--seconds", "120", "--seed", "7", "--warm-fraction", "0.02", "--max-count", "300000"]
        env = trials.tagged_env(tag, GPUBRIDGE_POLICY="hierarchical", GPUBRIDGE_CHUNK_BYTES="64K",
                                GPUBRIDGE_RING_MIN_BYTES="64K", GPUBRIDGE_TIMEOUT=TIMEOUT,
                                GPUBRIDGE_SOCKET_IFNAME=hosts.IFNAME)
        cmd = harness.launch_cmd(4, args, "nvidia:2,amd:2", keep_going=True, timeout=round(harness.scaled(60)))
        job = harness.LiveJob(cmd, env)
        warm = harness.wait_until(lambda: min(rig.sent_bytes(0), rig.sent_bytes(1)) >= CROSSED or
                                  job.p.poll() is not None, harness.scaled(60), 0.05) and job.p.poll() is None
        watch.poll()
        t_cut = trials.now()
        rig.cut(1)
        limit = TIMEOUT + round(harness.scaled(3))
        ended = job.wait_for(lambda L: all(any("FAIL" in l or l.startswith("ok:") for l in L.get(r, []))
                                           for r in range(4)), limit + 10)
        t_end = trials.now() - t_cut
        res = job.finish(round(harness.scaled(30)))
    finally:
        alive = trials.survivors(tag, 5.0)
        trials.kill_tagged(tag)
        rig.down()
    lines = res.lines()
    suite.check(warm, "%s: both hosts sent %d bytes over the link before the cut" % (name, CROSSED), res.tail(20))
    for r in range(4):
        fails = [l for l in lines.get(r, []) if "FAIL" in l]
        suite.check(fails and not any(l.startswith("ok:") for l in lines.get(r, [])),
                    "%s: rank %d ends with an error" % (name, r), "\n".join(lines.get(r, [])[-6:]))
        if fails:
            print("[%d] %s" % (r, fails[0][:200]), flush=True)
            m = re.search(r"\brank (\d+)\b.*(no progress|closed|failed|shut)", fails[0])
            suite.check(m is not None, "%s: rank %d's error names a rank and what happened" % (name, r), fails[0])
    suite.check(ended and t_end <= limit + 2, "%s: every rank reports within %d s of the cut (%.1f s)" %
                (name, limit + 2, t_end), res.tail(30))
    suite.check(not res.timed_out and res.rc != 0, "%s: the launcher ends, non-zero" % name,
                "rc %s timed out %s" % (res.rc, res.timed_out))
    suite.check(not alive, "%s: no process of the job is left" % name, "alive: %s" % alive)
    left = trials.shm_of(watch.pids())
    suite.check(not left, "%s: no /dev/shm segment of the job is left" % name, "left: %s" % left)
    trials.remove_shm(left)
    suite.check(not rig.left(), "%s: the rig's namespaces are gone" % name, "left: %s" % rig.left())


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    harness.require_built("rank_matrix", "rank_soak")
    suite = harness.Suite("hosts")
    why = hosts.unavailable()
    if why:
        suite.check(False, "the emulated hosts can be built here", why)
        suite.done()
    interfaces(suite, only)
    cut(suite, only)
    matrix(suite, only)
    suite.done()


if __name__ == "__main__":
    main()
