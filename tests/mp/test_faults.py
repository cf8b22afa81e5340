"""Faults: one rank of a nvidia:2,amd:2 job (leaders 0 and 2) kills or stops
itself at start-up (victim 3, and victim 0 which hosts the rendezvous root),
in the island phase (victim 1, a non-leader), in the bridge phase (victim
2, the amd leader) or during a send/recv group around the ring (p2p, victim
3: rank 0 receives from it across the bridge, over the send/recv channels
of the shared staging slots; the call check is off there, so the fault
meets the channels). Every survivor must report an error within
GPUBRIDGE_TIMEOUT + 2 s (3 + 2 s, both stretched under the sanitizers), and nothing may hang, and its text must name the
victim: after init, the first rank the text names is the victim, even where
the survivor first heard of the failure from a healthy rank that shut its
connections down because of it (the cause travels with the shutdown). Also:
gbCommAbort from another thread, while a collective waits on a stopped peer,
returns within 2 s.

    python3 tests/mp/test_faults.py [--only SUBSTRING] [--repeat N] [--shm auto|off]

--repeat N runs each selected fault case N times (the order in which a
survivor hears of a failure varies from run to run); --shm sets GPUBRIDGE_SHM
(off: every connection is TCP, and a cause travels as a frame, not in the
shared-memory segment).
"""
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
# Stretched by GB_TEST_TIME_SCALE under the sanitizers, whose start-up alone
# (a shared segment mapped under TSan) can take a 3 s GPUBRIDGE_TIMEOUT.
TIMEOUT = round(harness.scaled(3))        # GPUBRIDGE_TIMEOUT
LIMIT = TIMEOUT + round(harness.scaled(2))  # what a survivor may take to report
LAUNCHER_TIMEOUT = round(harness.scaled(30))

_ERR = re.compile(r"^error after (\d+(?:\.\d+)?) s: (.*)$")
_VICTIM = re.compile(r"^victim pid (\d+) raises")
_RANK = re.compile(r"\brank (\d+)\b")

# (phase, victim, signal)
SCENARIOS = [
    ("startup", 3, "KILL"), ("startup", 3, "STOP"),
    ("startup", 0, "KILL"), ("startup", 0, "STOP"),
    ("island", 1, "KILL"), ("island", 1, "STOP"),
    ("bridge", 2, "KILL"), ("bridge", 2, "STOP"),
    ("p2p", 3, "KILL"), ("p2p", 3, "STOP"),
]


SHM = sys.argv[sys.argv.index("--shm") + 1] if "--shm" in sys.argv else None


def fault_env(timeout=TIMEOUT, phase=None):
    # p2p: no call check, so the fault meets the send/recv channels, not the check's exchange.
    return harness.clean_env(GPUBRIDGE_TIMEOUT=timeout, GPUBRIDGE_SHM=SHM,
                             GPUBRIDGE_CHECK_CALLS="off" if phase == "p2p" else None)


def reported(lines, r):
    """The survivor's verdict line: 'error after ...' or 'no error after ...'."""
    for l in lines.get(r, []):
        if l.startswith("error after") or l.startswith("no error after") or l.startswith("setup:"):
            return l
    return None


def victim_pid(lines, victim):
    for l in lines.get(victim, []):
        m = _VICTIM.match(l)
        if m:
            return int(m.group(1))
    return None


def kill_victim(pid):
    """SIGKILLs the stopped victim this suite's job started (by its pid)."""
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def check_survivors(suite, name, lines, survivors, detail, victim, after_init=False, stopped=False):
    """Every survivor's text names the victim (stopped: or says which peer
    made no progress: when the victim stalls a rank that another waits on,
    both time out at about the same moment, and the other may name the rank
    it waited on; a cause relayed with the shutdown cannot win that race). after_init: the text
    (gbGetLastError(comm) after the failed all-reduce) must be the
    communicator's first failure, not a side effect of this rank's own abort
    (its connections shut down by this rank), and the first rank it names is
    the victim, never a healthy rank that only shut down after the victim
    failed. At start-up a survivor may name itself first ("rank 1 could not
    reach the rendezvous root ... check that rank 0 ... is running")."""
    for r in survivors:
        line = reported(lines, r) or ""
        m = _ERR.match(line)
        if not suite.check(m is not None, "%s: rank %d reports an error" % (name, r),
                           "rank %d printed: %r\n%s" % (r, line, detail)):
            continue
        secs, text = float(m.group(1)), m.group(2)
        suite.check(secs <= LIMIT, "%s: rank %d reports within %d s (%.2f s)" % (name, r, LIMIT, secs), line)
        suite.check(text and text != "(empty error text)", "%s: rank %d's error has a text" % (name, r), line)
        named = [int(x) for x in _RANK.findall(text)]
        stalled = stopped and "no progress from rank" in text
        suite.check(victim in named or stalled, "%s: rank %d's error names the victim, rank %d%s"
                    % (name, r, victim, " (or a stalled peer)" if stopped else ""), line)
        if after_init:
            suite.check("by this rank" not in text,
                        "%s: rank %d's error is its first failure, not a side effect of its abort" % (name, r), line)
            suite.check(named[:1] == [victim] or stalled, "%s: rank %d's error blames the victim, rank %d, first%s"
                        % (name, r, victim, " (or a stalled peer)" if stopped else ""), line)


def keep_going_case(suite, phase, victim, sig, launcher_kills):
    name = "%s victim %d SIG%s%s" % (phase, victim, sig, " (launcher --timeout)" if launcher_kills else "")
    survivors = [r for r in range(N) if r != victim]
    lt = round(harness.scaled(15)) if launcher_kills else LAUNCHER_TIMEOUT
    cmd = harness.launch_cmd(N, [harness.program("rank_faults"), "--victim", str(victim), "--phase", phase,
                                 "--signal", sig], VENDORS, keep_going=True, timeout=lt)
    job = harness.LiveJob(cmd, fault_env(phase=phase))
    job.wait_for(lambda L: all(reported(L, r) for r in survivors), LIMIT + 15)
    lines = job.lines()
    if sig == "STOP" and not launcher_kills:
        kill_victim(victim_pid(lines, victim))
    res = job.finish(lt + 15)
    lines = res.lines()
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    print("%s: rc %s, %.1f s; %s" % (name, res.rc, res.elapsed,
                                     "; ".join("[%d] %s" % (r, reported(lines, r)) for r in survivors)), flush=True)
    suite.check(victim_pid(lines, victim) is not None, name + ": the victim signalled itself", detail)
    check_survivors(suite, name, lines, survivors, detail, victim, after_init=phase != "startup",
                    stopped=sig == "STOP")
    suite.check(not res.timed_out and res.rc != 0, name + ": the job ends, with a failure", detail)
    if launcher_kills:
        suite.check(res.rc == 124, name + ": the launcher's --timeout stops the stopped victim (exit 124)", detail)


def fail_fast_case(suite, phase, victim, sig, expect_rc):
    """Without --keep-going the launcher stops the job at the first failure."""
    name = "%s victim %d SIG%s without --keep-going" % (phase, victim, sig)
    cmd = harness.launch_cmd(N, [harness.program("rank_faults"), "--victim", str(victim), "--phase", phase,
                                 "--signal", sig], VENDORS, timeout=LAUNCHER_TIMEOUT)
    res = harness.run(cmd, fault_env(), LAUNCHER_TIMEOUT + 15)
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    print("%s: rc %s, %.1f s" % (name, res.rc, res.elapsed), flush=True)
    suite.check(not res.timed_out and res.rc != 0 and res.rc != 124,
                name + ": the launcher exits non-zero before its timeout", detail)
    if expect_rc is not None:
        suite.check(res.rc == expect_rc, name + ": the launcher exits with the victim's status %d" % expect_rc,
                    detail)
    suite.check(res.elapsed < LIMIT + 10, name + ": the job ends promptly (%.1f s)" % res.elapsed, detail)


def abort_case(suite):
    """Rank 1 stops itself after init; rank 0's all-reduce waits on it, and a
    second thread of rank 0 aborts the communicator."""
    name = "abort while waiting on a stopped peer"
    timeout = 10  # long enough that only the abort can make rank 0 return in 2 s
    cmd = harness.launch_cmd(N, [harness.program("rank_faults"), "--abort-test", "--victim", "1", "--aborter",
                                 "0", "--count", str(1 << 20)], VENDORS, keep_going=True, timeout=LAUNCHER_TIMEOUT)
    job = harness.LiveJob(cmd, fault_env(timeout))
    done = lambda L: any(l.startswith("abort returned") or l.startswith("abort test:") for l in L.get(0, [])) and \
        all(reported(L, r) for r in (2, 3))
    job.wait_for(done, timeout + 15)
    kill_victim(victim_pid(job.lines(), 1))
    res = job.finish(LAUNCHER_TIMEOUT + 15)
    lines = res.lines()
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail())
    line = next((l for l in lines.get(0, []) if l.startswith("abort")), "")
    print("%s: %s; [2] %s; [3] %s" % (name, line, reported(lines, 2), reported(lines, 3)), flush=True)
    m = re.match(r"^abort returned after (\d+\.\d+) s \(result (-?\d+)\); synchronize returned after "
                 r"(\d+\.\d+) s \(result (-?\d+)\)", line)
    if suite.check(m is not None, name + ": rank 0 aborted while its all-reduce waited", detail):
        suite.check(float(m.group(1)) <= 2.0, name + ": gbCommAbort returns within 2 s", line)
        suite.check(float(m.group(3)) <= 2.0, name + ": the stream's wait returns within 2 s of the abort", line)
        suite.check(int(m.group(4)) != 0, name + ": the aborted all-reduce reports an error on its stream", line)
    for r in (2, 3):
        l = reported(lines, r) or ""
        em = _ERR.match(l)
        suite.check(em is not None and float(em.group(1)) <= timeout + 2,
                    name + ": rank %d reports an error within %d s" % (r, timeout + 2), l + "\n" + detail)
    suite.check(not res.timed_out, name + ": the job ends", detail)


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    harness.require_built("rank_faults")
    suite = harness.Suite("faults")
    for phase, victim, sig in SCENARIOS:
        launcher_kills = (phase, sig) == ("bridge", "STOP")
        if not only or only in "%s %d %s" % (phase, victim, sig):
            for _ in range(repeat):
                keep_going_case(suite, phase, victim, sig, launcher_kills)
    if not only or only == "fail-fast":
        fail_fast_case(suite, "island", 1, "KILL", 128 + signal.SIGKILL)
        fail_fast_case(suite, "bridge", 2, "STOP", None)
    if not only or only == "abort":
        abort_case(suite)
    suite.done()


if __name__ == "__main__":
    main()
