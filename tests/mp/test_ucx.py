"""The UCX transport (GPUBRIDGE_TRANSPORT=ucx, docs/UCX.md) where it differs
from TCP; the conformance suites themselves (test_matrix, test_collectives,
test_faults) run over UCX as CTest's ucx/ entries (GB_TEST_TRANSPORT=ucx).

- Islands on separate emulated hosts (tests/mp/hosts.py): a 16 MiB
  all-reduce and the light case set, every rank checking the bits; the bytes
  cross the hosts' link (UCX, which judges "same host" by the machine, is
  kept to its tcp transport by GPUBRIDGE_SIM_HOST), counted on gb0.
- Two simulated hosts (GPUBRIDGE_SIM_HOST by rank): the remote staging
  slots are registered with UCX (ucp_mem_map) and the bridge's messages
  move from and into them with the memory handle, bit for bit.
- One host with UCX's shared-memory transports allowed
  (UCX_TLS=tcp,posix,sysv,cma,self): the peer-failure mode gpubridge asks
  for still picks transports that carry the job.
- UCX missing (GPUBRIDGE_UCX_LIBRARY names no file): one verdict on every
  rank, naming every rank and what to install, within seconds.
- Ranks that disagree (rank 0 tcp, the others ucx): one verdict naming the
  setting and who uses which.
- gpubridge-info --preflight: UCX's version where it loads, a failure
  naming what to install where it does not.

    python3 tests/mp/test_ucx.py [--only SUBSTRING]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import hosts  # noqa: E402
import test_matrix as M  # noqa: E402

BIG = 4 << 20  # float32 elements: a 16 MiB all-reduce
VENDORS = "nvidia:2,amd:2"


def ucx_env(**extra):
    """rank_matrix's settings (the library's defaults, set: the expected order
    depends on them) over UCX, plus extra."""
    chunk, ring, _ = M.DEFAULTS
    return harness.clean_env(GPUBRIDGE_TRANSPORT="ucx", GPUBRIDGE_CHUNK_BYTES=chunk, GPUBRIDGE_RING_MIN_BYTES=ring,
                             **extra)


def matrix_args(seed, cases):
    return [harness.program("rank_matrix"), "--layout", ",".join(harness.vendor_list(VENDORS)),
            "--seed", str(seed)] + cases


def across_hosts(suite, only):
    label = "islands on two hosts over UCX"
    if only and only not in label:
        return
    why = hosts.unavailable()
    if why:
        suite.check(False, "the emulated hosts can be built here", why)
        return
    rig = hosts.Rig(2).up()
    try:
        env = ucx_env(GPUBRIDGE_POLICY="hierarchical", GPUBRIDGE_TIMEOUT=60,
                                GPUBRIDGE_SOCKET_IFNAME=hosts.IFNAME, UCX_TLS=None)
        before = [rig.sent_bytes(h) for h in (0, 1)]
        args = [rig.place([0, 0, 1, 1])] + matrix_args(
            41, ["--allreduce", "%d:float32:sum:o" % BIG] + M.NEW_LIGHT)
        res = harness.run_job(4, args, env, vendors=VENDORS, launcher_timeout=240, timeout=260)
        sent = [rig.sent_bytes(h) - before[h] for h in (0, 1)]
    finally:
        rig.down()
    harness.check_every_rank_ok(suite, res, 4, label)
    # Hierarchical over two bridge leaders: each sends its host's 16 MiB
    # part (the exchange or the ring's halves); at least half of it is a
    # floor no shared-memory shortcut could meet.
    suite.check(min(sent) >= BIG * 4 // 2, "%s: the bridge's bytes cross the link (host 0 sent %d, host 1 %d bytes "
                "on gb0)" % (label, sent[0], sent[1]))
    suite.check(not rig.left(), "%s: the rig's namespaces are gone" % label, "left: %s" % rig.left())


def ucx_shared_memory(suite, only):
    label = "one host, UCX_TLS=tcp,posix,sysv,cma,self"
    if only and only not in label:
        return
    env = ucx_env(GPUBRIDGE_TIMEOUT=60, UCX_TLS="tcp,posix,sysv,cma,self")
    res = harness.run_job(4, matrix_args(42, ["--allreduce", "%d:float32:sum:o" % (BIG // 4)] + M.NEW_LIGHT), env,
                          vendors=VENDORS, launcher_timeout=240, timeout=260)
    harness.check_every_rank_ok(suite, res, 4, label)


def registered_slots(suite, only):
    label = "two simulated hosts: remote staging slots registered with UCX"
    if only and only not in label:
        return
    env = ucx_env(GPUBRIDGE_POLICY="hierarchical", GPUBRIDGE_TIMEOUT=60, GPUBRIDGE_DEBUG="INFO",
                  GPUBRIDGE_DEBUG_SUBSYS="NET")
    hosts_by_rank = 'export GPUBRIDGE_SIM_HOST=h$((RANK / 2)); exec "$@"'
    res = harness.run_job(4, ["sh", "-c", hosts_by_rank, "sh"] + matrix_args(45, ["--allreduce", "%d:float32:sum:oi"
                                                                                  % BIG]),
                          env, vendors=VENDORS, launcher_timeout=240, timeout=260)
    harness.check_every_rank_ok(suite, res, 4, label)
    lines = res.lines().get(0, [])
    moved = [int(m.group(1)) for m in (re.search(r"UCX: (\d+) messages moved from or into the registered", l)
                                       for l in lines) if m]
    suite.check(any("UCX: registered" in l for l in lines) and moved and max(moved) > 0,
                "%s: rank 0 registered its slots and moved messages from and into them (%s)" % (label, moved),
                "\n".join(l for l in lines if "INFO" in l)[-1500:])


def verdict(suite, label, env, prog_args, wants):
    res = harness.run_job(4, prog_args, env, vendors=VENDORS, keep_going=True, launcher_timeout=60, timeout=80)
    lines = res.lines()
    for r in range(4):
        said = [l for l in lines.get(r, []) if all(w in l for w in wants)]
        suite.check(said, "%s: rank %d gives the verdict" % (label, r), "\n".join(lines.get(r, [])[-6:]))
    suite.check(res.rc != 0 and not res.timed_out and res.elapsed < 20, "%s: the job fails at once" % label,
                "rc %s after %.1f s" % (res.rc, res.elapsed))


def refusals(suite, only):
    label = "UCX missing"
    if not only or only in label:
        env = ucx_env(GPUBRIDGE_UCX_LIBRARY="/nonexistent/libucp.so.0",
                                GPUBRIDGE_TIMEOUT=30)
        verdict(suite, label, env, matrix_args(43, ["--allreduce", "7:float32:sum:o"]),
                ["ranks 0-3 (every rank)", "GPUBRIDGE_TRANSPORT=ucx, but UCX did not load",
                 "apt-get install libucx0", "GPUBRIDGE_TRANSPORT=tcp"])
    label = "rank 0 on tcp, ranks 1-3 on ucx"
    if not only or only in label:
        env = ucx_env(GPUBRIDGE_TIMEOUT=30)
        pick = 'if [ "$RANK" = 0 ]; then export GPUBRIDGE_TRANSPORT=tcp; fi; exec "$@"'
        verdict(suite, label, env, ["sh", "-c", pick, "sh"] + matrix_args(44, ["--allreduce", "7:float32:sum:o"]),
                ["ranks disagree on GPUBRIDGE_TRANSPORT", "rank 0 uses tcp, ranks 1-3 use ucx"])


def preflight(suite, only):
    label = "gpubridge-info --preflight"
    if only and only not in label:
        return
    info = os.path.join(os.path.dirname(harness.launcher()), "gpubridge-info")
    res = harness.run([info, "--preflight"], ucx_env(), 60)
    line = [l for l in res.out.splitlines() if l.startswith("transport")]
    suite.check(line and " ok " in line[0] and "ucx: UCX 1." in line[0],
                "%s: GPUBRIDGE_TRANSPORT=ucx: the transport check names UCX's version" % label, res.tail())
    res = harness.run([info, "--preflight"], ucx_env(GPUBRIDGE_UCX_LIBRARY="/nonexistent/libucp.so.0"), 60)
    suite.check(res.rc == 1 and "preflight: FAIL" in res.out and "transport: GPUBRIDGE_TRANSPORT=ucx, but UCX did "
                "not load" in res.out, "%s: UCX missing: the verdict fails naming it" % label, res.tail())


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    harness.require_built("rank_matrix")
    suite = harness.Suite("ucx")
    why = harness.ucx_missing()
    if why:
        print("SKIP: UCX is not installed here: %s" % why)
        sys.exit(77)
    across_hosts(suite, only)
    ucx_shared_memory(suite, only)
    registered_slots(suite, only)
    refusals(suite, only)
    preflight(suite, only)
    suite.done()


if __name__ == "__main__":
    main()
