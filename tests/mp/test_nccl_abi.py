"""libgpubridge-nccl: NCCL's C API over gpubridge, on simulated islands.

Each job runs tests/rank_nccl_abi under gpubridge-run; every rank opens
$BUILD/lib/libgpubridge-nccl.so by path and calls only nccl* functions found
there (plus gpubridge's stream and copy helpers, which stand in for CUDA).
Rank 0 makes each unique id with ncclGetUniqueId and hands its 128 bytes to
the others through a file in the job's directory.

A rank checks, with expected values it computes itself: ncclGetVersion
(22800 on simulated ranks), ncclGetErrorString, init blocking and not, every
collective (all types and ops of all-reduce; broadcast, ncclBcast, reduce,
all-gather, reduce-scatter, all-to-all, gather, scatter, in place too),
send/recv groups, PreMulSum, split (reordered keys, NCCL_SPLIT_NOCOLOR,
a non-blocking parent's child), configs of NCCL 2.14, 2.17, 2.18, 2.26,
2.27, 2.28 and 2.30 sizes, bad configs, ncclCommInitRankScalable,
ncclCommInitAll (one rank; two refused), abort, the fp8 types (max and min
all-reduce, a PreMulSum op) and refused
calls with their texts, then prints "ok: N checks". This driver checks that
every rank did, and the log lines that tell a user gpubridge is serving
(islands, policy) against the layout.

The interposition job: a fake libnccl.so.2, compiled here, calls its own
exported ncclCommGetAsyncError through its PLT while libgpubridge-nccl is
LD_PRELOADed (as NCCL 2.28 does with several of its functions): the call
must come back to the fake library (answer 42) and be logged as forwarded.

NCCL's variables: with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,GRAPH and
NCCL_SOCKET_IFNAME=lo and no GPUBRIDGE_ ones, the job logs what
GPUBRIDGE_DEBUG=INFO with GPUBRIDGE_DEBUG_SUBSYS=INIT logs (no other
subsystem), and every rank uses the interface lo; with GPUBRIDGE_DEBUG=WARN
set as well, no INFO line (the GPUBRIDGE_ variable wins).

The timeout job: each rank asks for one rank more than exist, with
GPUBRIDGE_TIMEOUT=3; gpubridge's timeout must arrive as ncclRemoteError (6:
the version reported, 2.28, has no ncclTimeout) with a text saying so.

    python3 tests/mp/test_nccl_abi.py [--only SUBSTRING]
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

LIBRARY = os.path.join(harness.BUILD_DIR, "lib", "libgpubridge-nccl.so")
INFO = {"GPUBRIDGE_DEBUG": "INFO", "GPUBRIDGE_DEBUG_SUBSYS": "INIT"}
# NCCL's own variables, which the drop-in honours where the GPUBRIDGE_ ones are unset.
NCCL_VARS = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH", "NCCL_SOCKET_IFNAME": "lo"}

# (label, vendors, case, extra environment, what the logs must show)
JOBS = [
    ("two islands", "nvidia:2,amd:2", "all", {}, "warn"),
    ("one island", "nvidia:2", "all", INFO, "info"),
    ("one island, NCCL_DEBUG", "nvidia:2", "all", NCCL_VARS, "info"),
    ("two islands, GPUBRIDGE_DEBUG wins", "nvidia:2,amd:2", "all", dict(NCCL_VARS, GPUBRIDGE_DEBUG="WARN"), "warn"),
    ("two islands, flat", "nvidia:2,amd:2", "all", dict(INFO, GPUBRIDGE_POLICY="flat"), "info"),
    ("vendor calls itself", "nvidia", "interpose", {"LD_PRELOAD": harness.preload(LIBRARY), "GPUBRIDGE_DEBUG": "INFO"}, None),
    ("one island, deadline", "nvidia:2", "timeout", {"GPUBRIDGE_TIMEOUT": "3"}, None),
    ("two islands, deadline", "nvidia,amd", "timeout", {"GPUBRIDGE_TIMEOUT": "3"}, None),
]

JOB_TIMEOUT = 300

# A vendor library as NCCL is built: default visibility, no -Bsymbolic, so
# its call to its own exported function goes through the PLT.
FAKE_VENDOR = r"""
typedef struct fakeComm* fakeComm_t;
int ncclCommGetAsyncError(fakeComm_t comm, int* asyncError) { (void)comm; *asyncError = 0; return 42; }
int fakeCallsItself(void) { int e = -1; return ncclCommGetAsyncError((fakeComm_t)0, &e); }
"""


def build_fake_vendor(work):
    """work/libnccl.so.2 from FAKE_VENDOR, or None with the reason printed."""
    cc = os.environ.get("CC") or harness.which("cc") or harness.which("gcc")
    if not cc:
        return None, "no C compiler (cc) to build the fake vendor library"
    src, lib = os.path.join(work, "fake_nccl.c"), os.path.join(work, "libnccl.so.2")
    with open(src, "w") as f:
        f.write(FAKE_VENDOR)
    res = harness.run([cc, "-shared", "-fPIC", "-O2", "-fsemantic-interposition", "-o", lib, src],
                      harness.clean_env(), 60)
    return (lib, "") if res.rc == 0 else (None, "%s failed: %s" % (cc, res.err.strip()[:400]))


def islands_text(ranks):
    """'nvidia:2 (leader 0), amd:2 (leader 2)': islands by vendor, in the order
    of their lowest rank (docs/ARCHITECTURE.md), each led by that rank."""
    order, size, leader = [], {}, {}
    for r, v in enumerate(ranks):
        if v not in size:
            order.append(v)
            size[v], leader[v] = 0, r
        size[v] += 1
    return ", ".join("%s:%d (leader %d)" % (v, size[v], leader[v]) for v in order), len(order)


def expected_policy(extra, ranks):
    """What a large all-reduce runs (gbTopology_t.policy): auto gives native
    on one island, flat when every island has one rank, split-rail when
    every island has two or more (GPUBRIDGE_RAILS unset), else hierarchical."""
    given = extra.get("GPUBRIDGE_POLICY")
    if given:
        return given
    sizes = [ranks.count(v) for v in set(ranks)]
    if len(sizes) == 1:
        return "native"
    if max(sizes) == 1:
        return "flat"
    return "split-rail" if min(sizes) >= 2 else "hierarchical"


def check_logs(suite, label, how, ranks, extra, lines, err):
    islands, nislands = islands_text(ranks)
    policy = expected_policy(extra, ranks)
    n = len(ranks)
    job = [l for l in err.splitlines() if "serves this job's NCCL calls" in l]
    want = "%d ranks, simulated run, islands %s, policy %s" % (n, islands, policy)
    if how != "info":
        suite.check(not job, "%s: the job line is INFO, so the default level prints none" % label, "\n".join(job))
        return
    suite.check(len(job) == 1 and job[0].startswith("[0] ") and " INFO INIT " in job[0] and want in job[0],
                "%s: one INFO line from rank 0 says gpubridge serves the job (%s)" % (label, want),
                "\n".join(job) or "(no such line)")
    for r in range(n):
        rank_lines = lines.get(r, [])
        serves = [l for l in rank_lines if "gpubridge serves NCCL calls:" in l]
        world = "rank %d of %d, GPU 0, simulated run; %d island%s: %s; policy %s; ncclGetVersion reports 22800" % (
            r, n, nislands, "" if nislands == 1 else "s", islands, policy)
        suite.check(any(world in l for l in serves), "%s: rank %d logs its world communicator at INFO" % (label, r),
                    "expected '%s' in one of:\n%s" % (world, "\n".join(serves[:6])))
        version = "simulated rank (GPUBRIDGE_VENDOR=%s): ncclGetVersion reports NCCL 2.28.0 (22800)" % ranks[r]
        suite.check(any(version in l for l in rank_lines), "%s: rank %d says which version it reports" % (label, r))
        for size, layout in ((24, "NCCL 2.14-2.16"), (48, "NCCL 2.18-2.26"), (72, "NCCL 2.27"), (80, "NCCL 2.28")):
            text = "config of %d bytes (%s)" % (size, layout)
            suite.check(any(text in l for l in rank_lines), "%s: rank %d reads '%s'" % (label, r, text))


def check_timeout(suite, label, ranks, lines):
    for r in range(len(ranks)):
        got = [l for l in lines.get(r, []) if l.startswith("timeout-result:")]
        m = re.match(r"timeout-result: (\d+): (.*)$", got[0]) if got else None
        suite.check(m is not None and m.group(1) == "6" and "within 3 s" in m.group(2)
                    and "returned as ncclRemoteError" in m.group(2),
                    "%s: rank %d gets ncclRemoteError (6) naming the deadline" % (label, r),
                    "\n".join(got) or "(no timeout-result line)")


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    harness.require_built("rank_nccl_abi")
    if not os.path.isfile(LIBRARY):
        print("FAIL: not built: %s (build first: make BUILD=...)" % LIBRARY)
        sys.exit(1)
    suite = harness.Suite("nccl_abi")
    for label, vendors, case, extra, logs in JOBS:
        name = "%s (%s, %s)" % (label, vendors, case)
        if only and only not in name:
            continue
        ranks = harness.vendor_list(vendors)
        work = tempfile.mkdtemp(prefix="gb-nccl-abi-")
        try:
            env = harness.clean_env(**dict({"GPUBRIDGE_TIMEOUT": 60}, **extra))
            cmd = [harness.program("rank_nccl_abi"), "--lib", LIBRARY, "--dir", work, "--case", case]
            if case == "interpose":
                fake, why = build_fake_vendor(work)
                if not suite.check(fake is not None, name + ": fake vendor library built", why):
                    continue
                cmd += ["--fake", fake]
            res = harness.run_job(len(ranks), cmd, env, vendors=vendors, launcher_timeout=JOB_TIMEOUT - 20,
                                  timeout=JOB_TIMEOUT)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        lines = res.lines()
        oks = {r: [l for l in ls if l.startswith("ok:")] for r, ls in lines.items()}
        missing = [r for r in range(len(ranks)) if not oks.get(r)]
        fails = ["[%d] %s" % (r, l) for r, ls in sorted(lines.items()) for l in ls if "FAIL" in l]
        print("%s: rc %d, %.1f s, %s" % (name, res.rc, res.elapsed, ", ".join(
            "rank %d %s" % (r, oks[r][0]) for r in sorted(oks) if oks[r])), flush=True)
        suite.check(res.rc == 0 and not missing and not fails and not res.timed_out, name + ": every rank ok",
                    "rc %s%s; ranks without ok: %s\n%s\n%s" % (res.rc, " (driver timeout)" if res.timed_out else "",
                                                               missing, "\n".join(fails[:8]), res.tail()))
        if case == "timeout":
            check_timeout(suite, name, ranks, lines)
        elif case == "interpose":
            said = [l for l in lines.get(0, []) if "called ncclCommGetAsyncError through the dynamic linker" in l
                    and "forwarded to" in l and "libnccl.so.2" in l]
            suite.check(len(said) == 1, name + ": the forwarded call is logged once at INFO",
                        "\n".join(lines.get(0, [])[-10:]))
        elif logs:
            check_logs(suite, name, logs, ranks, extra, lines, res.err)
        if "NCCL_SOCKET_IFNAME" in extra and logs == "info":
            for r in range(len(ranks)):
                said = [l for l in lines.get(r, []) if " INFO INIT using interface " in l]
                suite.check(said and all(l.endswith("using interface lo") for l in said),
                            "%s: rank %d uses NCCL_SOCKET_IFNAME's interface lo (INFO INIT)" % (name, r),
                            "\n".join(said[:5]) or "(no 'using interface' line)")
            others = [l for r in lines for l in lines[r] if " INFO " in l and " INFO INIT " not in l]
            suite.check(not others, name + ": NCCL_DEBUG_SUBSYS=INIT,GRAPH lets only INIT lines through",
                        "\n".join(others[:5]))
        if "NCCL_DEBUG" in extra and logs == "warn":
            info = [l for r in lines for l in lines[r] if " INFO " in l] + [l for l in res.err.splitlines() if " INFO " in l]
            suite.check(not info, name + ": GPUBRIDGE_DEBUG=WARN wins over NCCL_DEBUG=INFO: no INFO line",
                        "\n".join(info[:5]))
    suite.done()


if __name__ == "__main__":
    main()
