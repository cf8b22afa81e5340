"""Real faults, real dumps, one verdict: the flight recorder and
`gpubridge-info --trace` on nvidia:2,amd:2 jobs of rank_trace.

    python3 tests/mp/test_trace_faults.py [--only NAME] [--keep]

Each job makes 8 all-reduces (call i with count 1000+i) with
GPUBRIDGE_TIMEOUT=3, a fresh GPUBRIDGE_TRACE_DIR and
GPUBRIDGE_TRACE_SIGNAL=USR1; a victim departs from it at call 5
(rank_trace.c): stop (SIGSTOP), kill (SIGKILL), skip (leaves out call 5),
skip-last (leaves out call 8, then idles), count (half the count at call 5).
Each runs with the call check on and off. The driver waits for the first
dump, gives the other ranks until it is 1 s old (or all dumped), sends
SIGUSR1 to every rank expected to dump that has not, waits for their
dumps, then SIGKILLs a stopped victim and waits for the job to end.
Checks: every rank but a stopped or killed victim dumped and the victim did
not; an idle rank that got the signal saw its dump appear; `gpubridge-info --trace DIR` exits 0 and its last line is the verdict
sentence of docs/TRACE.md, computed here from the scenario (victim by number
and island, the collective, the key phrase); no temporary dump file, no
process and no /dev/shm segment of the job is left; the directory is
removed.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
ISLAND = harness.vendor_list(VENDORS)
TIMEOUT = 3
CALLS, AT = 8, 5
LAUNCHER_TIMEOUT = 60

# (scenario, check, victim); victims vary over leaders, members and islands.
JOBS = [("stop", "on", 2), ("stop", "off", 1),
        ("kill", "on", 1), ("kill", "off", 3),
        ("skip", "on", 3), ("skip", "off", 0),
        ("skip-last", "on", 0), ("skip-last", "off", 2),
        ("count", "on", 2), ("count", "off", 1)]


def expected(scenario, victim):
    """The verdict line (or, where the ranks' own errors decide a list, its
    fixed beginning, ending in '...') computed from the scenario."""
    who = "verdict: rank %d (island %s) " % (victim, ISLAND[victim])
    others = trials.ranks_text([r for r in range(N) if r != victim])
    if scenario == "stop":
        # which ranks "timed out waiting for it" depends on whose error named it
        return who + "stopped responding during collective #%d (all_reduce): it left no trace and ..." % AT
    if scenario == "kill":
        return who + ("died during collective #%d (all_reduce): its connections closed without a cause and it "
                      "left no trace" % AT)
    if scenario == "skip":
        return who + ("skipped collective #%d (all_reduce, count %d, float32): its calls from #%d on match the "
                      "other ranks' calls from #%d on" % (AT, 1000 + AT, AT, AT + 1))
    if scenario == "skip-last":
        return who + ("never called collective #%d (all_reduce): it finished #%d and made no further call while "
                      "%s wait inside #%d" % (CALLS, CALLS - 1, others, CALLS))
    return who + ("called collective #%d with count %d where %s used count %d (all_reduce, float32)"
                  % (AT, (1000 + AT) // 2, others, 1000 + AT))


def matches(line, want):
    return line.startswith(want[:-3]) if want.endswith("...") else line == want


_DUMP = re.compile(r"^gpubridge-trace-[0-9a-f]{16}-r(\d+)\.json$")


def dumped(d):
    """{rank: file name} of the finished dumps in d."""
    out = {}
    for name in os.listdir(d):
        m = _DUMP.match(name)
        if m:
            out[int(m.group(1))] = name
    return out


def info_cmd(*args):
    return [os.path.join(harness.BUILD_DIR, "bin", "gpubridge-info")] + list(args)


def has_recorder():
    p = subprocess.run(info_cmd("-c"), capture_output=True, text=True, timeout=60, env=harness.clean_env())
    return "GPUBRIDGE_TRACE_DIR" in p.stdout


def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def run_job(suite, scenario, check, victim):
    name = "%s check %s victim %d" % (scenario, check, victim)
    d = tempfile.mkdtemp(prefix="gb-trace-faults-")
    tag = trials.new_tag()
    watch = trials.PidWatch(tag)
    gone = scenario in ("stop", "kill")  # the victim writes nothing
    dumpers = [r for r in range(N) if not (gone and r == victim)]
    env = trials.tagged_env(tag, GPUBRIDGE_TIMEOUT=TIMEOUT, GPUBRIDGE_TRACE_DIR=d, GPUBRIDGE_TRACE_SIGNAL="USR1",
                            GPUBRIDGE_CHECK_CALLS=check)
    cmd = harness.launch_cmd(N, [harness.program("rank_trace"), "--scenario", scenario, "--victim", str(victim),
                                 "--calls", str(CALLS), "--at", str(AT)], VENDORS, keep_going=True,
                             timeout=LAUNCHER_TIMEOUT)
    job = harness.LiveJob(cmd, env)
    signalled = []
    try:
        first = job.wait_for(lambda L: watch.poll() is None or dumped(d), TIMEOUT + 20)
        t_first = trials.now()
        if first:
            # the others' own failures come within moments; then those still silent get the signal
            trials.until(1.0, lambda: watch.poll() is None or all(r in dumped(d) for r in dumpers))
            for r in dumpers:
                if r not in dumped(d) and r in watch.ranks and signal_pid(watch.ranks[r], signal.SIGUSR1):
                    signalled.append(r)
            trials.until(harness.scaled(10), lambda: all(r in dumped(d) for r in dumpers))
        if scenario == "stop" and victim in watch.ranks:
            signal_pid(watch.ranks[victim], signal.SIGKILL)  # the stopped victim this job started
        res = job.finish(LAUNCHER_TIMEOUT + 15)
    finally:
        alive = trials.survivors(tag, 5.0)
        trials.kill_tagged(tag)
    files = sorted(os.listdir(d))
    have = dumped(d)
    p = subprocess.run(info_cmd("--trace", d), capture_output=True, text=True, timeout=60, env=harness.clean_env())
    harness.scan_sanitizer(info_cmd("--trace", d), p.stdout + p.stderr)
    got = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    want = expected(scenario, victim)
    print("%s: rc %s, %.1f s, first dump after %.1f s, signalled %s\n%s" % (
        name, res.rc, res.elapsed, t_first - job.t0, trials.ranks_text(signalled) if signalled else "none",
        "\n".join("  | " + l for l in p.stdout.splitlines())), flush=True)
    detail = "job:\n%s\nanalyzer exit %d\n%s%s" % (res.tail(40), p.returncode, p.stdout, p.stderr)
    suite.check(sorted(have) == dumpers, "%s: %s dumped%s" % (
        name, trials.ranks_text(dumpers), ", the victim did not" if gone else ""), "dumps: %s\n%s" % (files, detail))
    suite.check(p.returncode == 0 and matches(got, want), "%s: the verdict names rank %d" % (name, victim),
                "want: %s\ngot:  %s\n%s" % (want, got, detail))
    lines = res.lines()
    for r in signalled:  # an idle rank waits for its dump, which only the signal writes
        quiet = any(l.startswith("no error after") for l in lines.get(r, []))
        if quiet:
            suite.check("dumped on the signal" in lines.get(r, []),
                        "%s: rank %d, idle, dumped on GPUBRIDGE_TRACE_SIGNAL" % (name, r), detail)
    tmp = [f for f in files if ".tmp." in f]
    suite.check(not tmp, "%s: no temporary dump file is left" % name, "left: %s" % tmp)
    suite.check(not res.timed_out, "%s: the job ends" % name, detail)
    suite.check(not alive, "%s: no process of the job is left" % name, "alive: %s" % alive)
    left = trials.shm_of(watch.pids())
    suite.check(not left, "%s: no /dev/shm segment of the job is left" % name, "left: %s" % left)
    trials.remove_shm(left)
    if "--keep" in sys.argv:
        print("kept " + d)
    else:
        shutil.rmtree(d, ignore_errors=True)
        suite.check(not os.path.exists(d), "%s: the dump directory is removed" % name)


def main():
    only = trials.arg("only", None)
    harness.require_built("rank_trace")
    if not has_recorder():
        print("FAIL: this library has no flight recorder (gpubridge-info -c lists no GPUBRIDGE_TRACE_DIR); "
              "build it from this checkout")
        sys.exit(1)
    suite = harness.Suite("trace faults")
    for scenario, check, victim in JOBS:
        if not only or only in "%s check %s" % (scenario, check):
            run_job(suite, scenario, check, victim)
    suite.done()


if __name__ == "__main__":
    main()
