"""Fault trials, repeated: one rank of nvidia:2,amd:2 is killed (SIGKILL) or
stopped (SIGSTOP) at a moment drawn from the seed, many times per case, and
after every trial nothing of the job may be left.

    python3 tests/mp/test_fault_trials.py [--per-case 3] [--seed N] [--only CASE]

Cases (each with KILL and with STOP; victim drawn from the seed):
  startup     the victim signals itself before init (rank_faults --phase startup)
  collective  the victim signals itself right after enqueueing its all-reduce
  external    this driver signals the victim from outside, 0..0.8 s after its
              process appeared: during start-up, the rendezvous, the mesh, the
              all-reduce or after it
  loop        every rank inits, splits and destroys over and over
              (rank_faults --phase loop); this driver signals the victim
              from outside 0..0.8 s after its process appeared, so at a
              varied moment of some start-up; every survivor's error must
              name the victim and blame no survivor for a closed connection,
              also behind a chain of waits (a survivor that waited on the
              victim, while this rank waited on it); two chains are not
              told yet and pass when they name what they can: the root at
              the next cycle's rendezvous, and a survivor that got no
              verdict from the dying root
Rank program and verdict lines are test_faults.py's (rank_faults.c). Checks
per trial: every survivor prints "error after X s: <text>" with a text (an
external signal that came after the all-reduce may also leave "no error
after"), within GPUBRIDGE_TIMEOUT + 3 s (the 2 stretched under the
sanitizers) of the moment the last survivor to report began its timing
(each error comes with "began at T"): under load one survivor may begin its
all-reduce seconds after another, which meanwhile waits on it while it
still makes progress. The launcher ends, non-zero
when the victim died before finishing; a stopped victim is killed by this
driver once the survivors reported; then no process of the job is alive
and no /dev/shm/gpubridge-<pid>-* segment of any of its ranks is left.
In CI 3 trials per case (24); --per-case 20 is the full run.
"""
import os
import random
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

N = 4
VENDORS = "nvidia:2,amd:2"
TIMEOUT = round(harness.scaled(3))          # GPUBRIDGE_TIMEOUT, stretched under the sanitizers as test_faults' is
# What a survivor may take to report: its deadline, the grace in which a
# failed start-up asks the rank it blames (core/blame.c), and 2 s for a busy machine.
LIMIT = TIMEOUT + 1 + round(harness.scaled(2))
LAUNCHER_TIMEOUT = round(harness.scaled(40))
CASES = ["startup", "collective", "external", "loop"]
SIGNALS = ["KILL", "STOP"]

_ERR = re.compile(r"^error after (\d+(?:\.\d+)?) s: (.*)$")
_BEGAN = re.compile(r"^began at (\d+(?:\.\d+)?)$")
_NOERR = re.compile(r"^no error after (\d+(?:\.\d+)?) s")
# An external signal may land while the job starts: init then fails. Its text
# names the victim, also for a rank that waited on another survivor that
# itself waited on the victim (core/blame.c asks that survivor).
_CLOSER = re.compile(r"\brank (\d+) (?:closed|shut) the connection")
_SETUP = re.compile(r"^setup: init failed \(\d+\) before the fault: (.*)$")


def verdict(lines, r):
    for l in lines.get(r, []):
        if l.startswith("error after") or l.startswith("no error after") or l.startswith("setup:"):
            return l
    return None


def began(lines, r):
    """When rank r began the timing its error reports (CLOCK_MONOTONIC), or None."""
    for l in lines.get(r, []):
        m = _BEGAN.match(l)
        if m:
            return float(m.group(1))
    return None


def late_by(lines, r, survivors):
    """How much later than rank r the last survivor that reported began its
    timing (0 when r began last, or without "began at" lines)."""
    mine = began(lines, r)
    others = [t for t in (began(lines, s) for s in survivors) if t is not None]
    return max(0.0, max(others) - mine) if mine is not None and others else 0.0


def named_ranks(text):
    """Every rank a text names: "rank 3", and the lists "ranks 1,3" and "ranks 0-2"."""
    out = set()
    for spec in re.findall(r"\branks? (\d+(?:[,-]\d+)*)", text):
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


# A rank already at the next cycle's rendezvous while rank 0, the root, still
# waits on the victim in the last one: no communicator joins them yet, so it
# can only name the root it waits for (ARCHITECTURE, Failure: not told yet).
_NEXT_ROOT = re.compile(r"could not reach the rendezvous root .*check that rank 0")


# A rank waiting for the connection of a survivor that got no verdict: the
# root, rank 0, died while handing the verdicts out, so that survivor never
# learned the others' addresses to tell them (ARCHITECTURE, Failure: not
# told yet). Its own error names the root.
_NOT_CONNECTED = re.compile(r"\brank (\d+) did not connect \(group ")
_NO_VERDICT = "got no verdict from the rendezvous root"


def no_verdict_behind(text, victim, lines):
    m = _NOT_CONNECTED.search(text)
    if victim != 0 or not m:
        return False
    other = verdict(lines, int(m.group(1))) or ""
    return _NO_VERDICT in other


def names_victim(text, victim, lines):
    """Whether a start-up error names the victim and blames no survivor for
    a closed connection: a survivor that failed first says who failed, in
    its shutdown, in its answer to a connection it never took or in a notice
    to a rank that waited for its connection, and a survivor this rank timed
    out on is asked whom it waited on."""
    closers = [int(x) for x in _CLOSER.findall(text)]
    return all(c == victim for c in closers) and (victim in named_ranks(text) or _NEXT_ROOT.search(text) is not None
                                                  or no_verdict_behind(text, victim, lines))


def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def trial(suite, rng, case, sig, index):
    victim = rng.randrange(N)
    delay = round(rng.uniform(0.0, 0.8), 3)
    outside = case in ("external", "loop")
    name = "%s SIG%s #%d victim %d%s" % (case, sig, index, victim, " at %.3f s" % delay if outside else "")
    tag = trials.new_tag()
    watch = trials.PidWatch(tag)
    if outside:  # no rank signals itself
        args = ["--victim", "99", "--phase", "loop" if case == "loop" else "island", "--signal", "KILL"]
    else:
        args = ["--victim", str(victim), "--phase", "startup" if case == "startup" else "island", "--signal", sig]
    cmd = harness.launch_cmd(N, [harness.program("rank_faults")] + args, VENDORS, keep_going=True,
                             timeout=LAUNCHER_TIMEOUT)
    job = harness.LiveJob(cmd, trials.tagged_env(tag, GPUBRIDGE_TIMEOUT=TIMEOUT))
    survivors = [r for r in range(N) if r != victim]
    signalled, victim_pid = None, None
    try:
        if outside:
            found = job.wait_for(lambda L: victim in watch.poll(), 15)
            victim_pid = watch.ranks.get(victim)
            if found and victim_pid:
                t_seen = trials.now()
                job.wait_for(lambda L: watch.poll() is None or trials.now() - t_seen >= delay, delay + 1)
                signalled = signal_pid(victim_pid, signal.SIGKILL if sig == "KILL" else signal.SIGSTOP)
        job.wait_for(lambda L: (watch.poll() is None) or all(verdict(L, r) for r in survivors), LIMIT + 20)
        lines = job.lines()
        if victim_pid is None:
            victim_pid = watch.ranks.get(victim)
        if sig == "STOP" and victim_pid:
            signal_pid(victim_pid, signal.SIGKILL)  # the stopped victim this trial started
        res = job.finish(LAUNCHER_TIMEOUT + 15)
    finally:
        alive = trials.survivors(tag, 5.0)
        trials.kill_tagged(tag)
    lines = res.lines()
    detail = "rc %s, %.1f s\n%s" % (res.rc, res.elapsed, res.tail(30))
    summary = "; ".join("[%d] %s" % (r, (verdict(lines, r) or "(none)")[:110]) for r in survivors)
    print("%s: rc %s, %.1f s%s; %s" % (name, res.rc, res.elapsed,
                                       "" if signalled is None else (" (signalled)" if signalled else
                                                                    " (victim already gone)"), summary), flush=True)
    for r in survivors:
        line = verdict(lines, r) or ""
        m = _ERR.match(line)
        late_ok = case == "external" and _NOERR.match(line) is not None
        setup = _SETUP.match(line) if case == "external" else None
        early_ok = setup is not None and re.search(r"\brank \d+\b", setup.group(1)) is not None
        if not suite.check(m is not None or late_ok or early_ok, "%s: rank %d reports an error" % (name, r),
                           "rank %d printed %r\n%s" % (r, line, detail)):
            continue
        if m:
            secs, text = float(m.group(1)), m.group(2)
            late = late_by(lines, r, survivors)
            suite.check(secs - late <= LIMIT and text and text != "(empty error text)",
                        "%s: rank %d's error comes within %d s of the last survivor's start, with a text"
                        % (name, r, LIMIT), "%s\n(the last survivor began %.2f s after this rank)" % (line, late))
        if m and case == "loop":
            suite.check(names_victim(text, victim, lines),
                        "%s: rank %d's error names the victim, rank %d" % (name, r, victim), line)
    suite.check(not res.timed_out, "%s: the launcher ends" % name, detail)
    if case != "external":
        suite.check(res.rc != 0, "%s: the launcher exits non-zero" % name, detail)
    suite.check(not alive, "%s: no process of the job is left" % name, "alive: %s" % alive)
    left = trials.shm_of(watch.pids())
    suite.check(not left, "%s: no /dev/shm segment of the job is left" % name,
                "left: %s (rank pids %s)" % (left, watch.ranks))
    trials.remove_shm(left)


def main():
    per_case = trials.arg("per-case", 3, int)
    only = trials.arg("only", None)
    harness.require_built("rank_faults")
    suite = harness.Suite("fault trials")
    seed = trials.seeded("fault trials")
    rng = random.Random(seed)
    for i in range(per_case):
        for case in CASES:
            for sig in SIGNALS:
                # Draw even for skipped cases, so --only replays the same trials.
                sub = random.Random(rng.randrange(1 << 62))
                if not only or only in "%s %s" % (case, sig):
                    trial(suite, sub, case, sig, i)
    suite.done()


if __name__ == "__main__":
    main()
