"""Helpers of the repeated and long-running suites (test_fault_trials.py,
test_fuzz_wire.py, test_leak_loops.py, test_soak.py): a seed that is printed
and can be replayed, the processes of one job found by a tag in their
environment, and what a job left behind (/dev/shm segments, live processes).

Standard library only; built on harness.py.
"""
import os
import random
import re
import signal
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TAG_VAR = "GB_TRIAL_TAG"


def arg(name, default, conv=str):
    """--name VALUE from sys.argv, else default."""
    flag = "--" + name
    if flag in sys.argv:
        i = sys.argv.index(flag)
        if i + 1 >= len(sys.argv):
            print("FAIL: %s needs a value" % flag)
            sys.exit(2)
        return conv(sys.argv[i + 1])
    return default


def seeded(suite_name):
    """The run's seed (--seed N, else a fresh one), printed with the command that replays it."""
    seed = arg("seed", None, int)
    if seed is None:
        seed = random.SystemRandom().randrange(1, 1 << 31)
    argv = [a for i, a in enumerate(sys.argv[1:], 1)
            if a != "--seed" and (i < 2 or sys.argv[i - 1] != "--seed")]
    print("%s: seed %d (replay: python3 %s %s--seed %d)" % (suite_name, seed, sys.argv[0],
                                                           "".join(a + " " for a in argv), seed), flush=True)
    return seed


def new_tag():
    return "gbt-" + uuid.uuid4().hex[:16]


def tagged_env(tag, **extra):
    """harness.clean_env plus the tag that marks every process of the job."""
    extra[TAG_VAR] = tag
    return harness.clean_env(**extra)


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except (OSError, ValueError):
        return None


def _state(pid):
    """The process state letter from /proc/PID/stat (Z: zombie), or None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
        return text[text.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def tagged_pids(tag):
    """{pid: RANK or None} of the live (non-zombie) processes carrying tag."""
    want = ("%s=%s" % (TAG_VAR, tag)).encode()
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        env = _environ(pid)
        if env is None or want not in env:
            continue
        if _state(pid) in (None, "Z"):
            continue
        rank = None
        for e in env:
            if e.startswith(b"RANK="):
                try:
                    rank = int(e[5:])
                except ValueError:
                    pass
        out[pid] = rank
    return out


def rank_pids(tag):
    """{rank: pid} of the job's rank processes (those with RANK set)."""
    return {r: p for p, r in tagged_pids(tag).items() if r is not None}


def survivors(tag, timeout=5.0):
    """Processes of the job still alive after up to timeout s (they may be exiting)."""
    left = harness.wait_until(lambda: not tagged_pids(tag), timeout)
    return {} if left else tagged_pids(tag)


def kill_tagged(tag):
    """SIGKILLs, by pid, the processes this suite started under tag (cleanup after a failure)."""
    for pid in tagged_pids(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


_SHM = re.compile(r"^gpubridge-(\d+)-")


def shm_of(pids):
    """/dev/shm/gpubridge-PID-* entries of the given pids (the name carries the creator's pid)."""
    pids = set(pids)
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    return sorted(n for n in names if _SHM.match(n) and int(_SHM.match(n).group(1)) in pids)


def remove_shm(names):
    for n in names:
        try:
            os.unlink(os.path.join("/dev/shm", n))
        except OSError:
            pass


class PidWatch:
    """Records every rank pid of a job while it runs (polled), so segments
    and survivors can be attributed to this job even after it ended."""

    def __init__(self, tag):
        self.tag = tag
        self.ranks = {}

    def poll(self):
        for r, p in rank_pids(self.tag).items():
            self.ranks.setdefault(r, p)
        return self.ranks

    def pids(self):
        return set(self.ranks.values())


def until(deadline_s, cond, interval=0.01):
    """Polls cond() until true or deadline_s passed; returns its last value."""
    return harness.wait_until(cond, deadline_s, interval)


def now():
    return time.monotonic()


def ranks_text(ranks):
    """'rank 2' / 'ranks 0,1,3' / 'ranks 1-3': runs of three or more as
    ranges, as gpubridge-info --trace writes rank lists."""
    ranks = sorted(ranks)
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts += ["%d-%d" % (ranks[i], ranks[j])] if j - i >= 2 else [str(r) for r in ranks[i:j + 1]]
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(parts)
