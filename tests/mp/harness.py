"""Shared helpers of the multi-process suites (tests/mp/test_*.py).

Standard library only. Every process gets a timeout; every wait is a
condition polled up to a deadline, never a bare sleep.
"""
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from ports import free_port  # noqa: E402 (tests/ports.py, shared with the other suites)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("GB_TEST_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD_DIR = os.environ.get("GB_TEST_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")

# Variables a job must not inherit from whoever runs the suite.
_JOB_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
             "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


# Sanitizer builds (tests/sanitizers/README.md): a report in any rank or tool
# fails the suite even where the test expected that process to fail, because
# exit codes alone cannot tell a sanitizer's exit from an expected error.
SANITIZER_REPORT = re.compile(r"ERROR: (?:AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer"
                              r"|ThreadSanitizer: (?!reported)|:\d+(?::\d+)?: runtime error: "
                              r"|SUMMARY: UndefinedBehaviorSanitizer")
_sanitizer_reports = []  # (command, report excerpt), printed and counted by Suite.done

# Deadlines of harness waits (and of tests that use scaled()) are multiplied by
# GB_TEST_TIME_SCALE, set by the sanitizer targets: instrumented code runs slower.
TIME_SCALE = float(os.environ.get("GB_TEST_TIME_SCALE") or 1)
# GB_TEST_TRANSPORT=ucx runs a suite's jobs over that transport (CTest's
# ucx/ entries): the same checks, another transport.
TRANSPORT = os.environ.get("GB_TEST_TRANSPORT", "")


def scaled(seconds):
    """A deadline in seconds, stretched by GB_TEST_TIME_SCALE."""
    return seconds * TIME_SCALE


def scan_sanitizer(cmd, text):
    """Records every sanitizer report in text (output of cmd); returns True if any."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if SANITIZER_REPORT.search(line)]
    if not hits:
        return False
    excerpt = "\n".join(lines[max(0, hits[0] - 2):hits[0] + 60])
    _sanitizer_reports.append((" ".join(str(c) for c in cmd), excerpt))
    print("SANITIZER REPORT in: %s\n%s" % (" ".join(str(c) for c in cmd), excerpt), flush=True)
    return True


def sanitizer_runtime():
    """The sanitizer runtime (libasan, libtsan) the built library links, or None.
    It must come first in LD_PRELOAD whenever the library is preloaded."""
    lib = os.path.join(BUILD_DIR, "lib", "libgpubridge.so")
    try:
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"lib[at]san\.so[.\d]* => (\S+)", out)
    return m.group(1) if m else None


def preload(*libs):
    """An LD_PRELOAD value for libs, led by the sanitizer runtime in sanitizer builds."""
    rt = sanitizer_runtime()
    return " ".join(([rt] if rt else []) + list(libs))


def python_env(env):
    """env for a python that loads the built library with ctypes: in a
    sanitizer build the runtime is preloaded (it must come first), and leak
    checking is off in that process (the interpreter's own allocations at exit
    are not the library's; the C suites check the library's leaks)."""
    rt = sanitizer_runtime()
    if not rt:
        return env
    env = dict(env, LD_PRELOAD=preload())
    if "libasan" in rt:
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return env


def launcher():
    return os.path.join(BUILD_DIR, "bin", "gpubridge-run")


def program(name):
    return os.path.join(BUILD_DIR, "tests", name)


def ucx_missing():
    """Why UCX cannot run here, or None."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"):
        if os.path.exists(os.path.join(d, "libucp.so.0")):
            return None
    return "no libucp.so.0 (apt-get install libucx0; make test installs it)"


def require_built(*names):
    """Fails the suite with a clear message when a needed binary is missing;
    skips it (77) when GB_TEST_TRANSPORT names a transport this machine lacks."""
    missing = [p for p in [launcher()] + [program(n) for n in names] if not os.access(p, os.X_OK)]
    if missing:
        print("FAIL: not built: " + ", ".join(missing) + " (build first: make BUILD=...)")
        sys.exit(1)
    if TRANSPORT == "ucx" and ucx_missing():
        print("SKIP: GB_TEST_TRANSPORT=ucx, but " + ucx_missing())
        sys.exit(77)


def clean_env(**extra):
    """The suite's environment without GPUBRIDGE_* and launcher variables,
    plus extra (values converted to str; None removes)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUBRIDGE_") and not k.startswith("OMPI_") and k not in _JOB_VARS}
    if TRANSPORT:
        env["GPUBRIDGE_TRANSPORT"] = TRANSPORT
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def vendor_list(spec):
    """'nvidia:2,amd:1' or 'nvidia,amd,nvidia' -> ['nvidia', 'nvidia', 'amd']."""
    out = []
    for part in spec.split(","):
        if ":" in part:
            name, n = part.split(":")
            out += [name] * int(n)
        else:
            out.append(part)
    return out


def wait_until(cond, timeout, interval=0.02):
    """Polls cond() until it is true or timeout seconds passed; returns its last value."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)  # polling interval of a deadline-bounded wait


_TAG = re.compile(r"^\[(\d+)\] ?(.*)$")


def by_rank(text):
    """{rank: [lines]} from the launcher's tagged output ("[r] line")."""
    out = {}
    for line in text.splitlines():
        m = _TAG.match(line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


class Result:
    def __init__(self, cmd, rc, out, err, elapsed, timed_out):
        self.cmd, self.rc, self.out, self.err = cmd, rc, out, err
        self.elapsed, self.timed_out = elapsed, timed_out
        self.sanitizer = scan_sanitizer(cmd, out + "\n" + err)

    def lines(self):
        """{rank: [lines]} of stdout and stderr together."""
        merged = by_rank(self.out)
        for r, ls in by_rank(self.err).items():
            merged.setdefault(r, []).extend(ls)
        return merged

    def tail(self, n=40):
        text = (self.out + ("\n--- stderr ---\n" + self.err if self.err.strip() else "")).splitlines()
        return "\n".join(text[-n:])


def launch_cmd(n, prog_args, vendors=None, keep_going=False, timeout=None, port=None, extra=()):
    cmd = [launcher(), "-n", str(n)]
    if vendors:
        cmd += ["--vendors", vendors]
    if keep_going:
        cmd.append("--keep-going")
    if timeout:
        cmd += ["--timeout", str(timeout)]
    if port:
        cmd += ["--port", str(port)]
    cmd += list(extra) + ["--"] + list(prog_args)
    return cmd


# gpubridge-run draws MASTER_PORT at random below the ephemeral range when
# it is given none; a suite running alongside may draw the same one first.
PORT_RACE = re.compile(r"cannot listen on 127\.0\.0\.1:\d+: bind: Address already in use")


def run(cmd, env, timeout):
    """Runs cmd to completion or timeout seconds (scaled; then kills its process group).
    A job whose launcher drew its port (no --port) and lost it to another
    suite's job runs again, at most twice: that race is the test machine's."""
    for attempt in range(3):
        res = _run_once(cmd, env, timeout)
        drew = len(cmd) > 0 and cmd[0] == launcher() and "--port" not in cmd
        if not (drew and res.rc != 0 and PORT_RACE.search(res.err + res.out)) or attempt == 2:
            return res
        print("harness: the job's port was taken by another job; running it again", flush=True)
    return res


def _run_once(cmd, env, timeout):
    timeout = scaled(timeout)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(p)
        out, err = p.communicate(timeout=30)
    return Result(cmd, p.returncode, out, err, time.monotonic() - t0, timed_out)


def run_job(n, prog_args, env, vendors=None, keep_going=False, launcher_timeout=None, port=None,
            timeout=120, extra=()):
    return run(launch_cmd(n, prog_args, vendors, keep_going, launcher_timeout, port, extra), env, timeout)


def _kill_group(p):
    """Kills the process group this harness started for p (its own session)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LiveJob:
    """A job whose output is read while it runs, so a test can wait for lines."""

    def __init__(self, cmd, env):
        self.cmd = cmd
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True, errors="replace",
                                  start_new_session=True)
        self._lock = threading.Lock()
        self.out_lines, self.err_lines = [], []
        self._threads = [threading.Thread(target=self._pump, args=(self.p.stdout, self.out_lines), daemon=True),
                         threading.Thread(target=self._pump, args=(self.p.stderr, self.err_lines), daemon=True)]
        for t in self._threads:
            t.start()

    def _pump(self, f, sink):
        for line in f:
            with self._lock:
                sink.append(line.rstrip("\n"))

    def text(self):
        with self._lock:
            return "\n".join(self.out_lines), "\n".join(self.err_lines)

    def lines(self):
        out, err = self.text()
        merged = by_rank(out)
        for r, ls in by_rank(err).items():
            merged.setdefault(r, []).extend(ls)
        return merged

    def wait_for(self, cond, timeout):
        """Polls cond(lines_by_rank) until it holds (True), or the job ended
        without it or the deadline passed (False)."""
        def check():
            if cond(self.lines()):
                return "yes"
            if self.p.poll() is not None:
                for t in self._threads:  # the pipes may still hold the last lines
                    t.join(timeout=10)
                return "yes" if cond(self.lines()) else "ended"
            return None
        return wait_until(check, scaled(timeout)) == "yes"

    def finish(self, timeout):
        """Waits for the job to end (killing its group at the deadline); returns a Result."""
        timed_out = False
        try:
            self.p.wait(timeout=scaled(timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(self.p)
            self.p.wait(timeout=30)
        for t in self._threads:
            t.join(timeout=10)
        out, err = self.text()
        return Result(self.cmd, self.p.returncode, out, err, time.monotonic() - self.t0, timed_out)


class Suite:
    """Counts checks; prints 'N passed, N failed' at the end and exits. The
    failed checks are repeated just before that line, each with the first
    lines of its detail, so a log cut in the middle (CI keeps its head and
    tail) still says what failed."""

    RECAP_LINES = 12

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.failures = []
        self.t0 = time.monotonic()

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print("PASS " + what, flush=True)
        else:
            self.failed += 1
            self.failures.append((what, detail))
            print("FAIL " + what + ("\n" + detail if detail else ""), flush=True)
        return ok

    def done(self):
        for cmd, excerpt in _sanitizer_reports:
            self.check(False, "no sanitizer report (see SANITIZER REPORT above) in: " + cmd, excerpt)
        if self.failures:
            print("%s: the %d failed checks again:" % (self.name, len(self.failures)))
        for what, detail in self.failures:
            print("FAIL " + what)
            for line in str(detail).splitlines()[:self.RECAP_LINES]:
                print("    " + line)
        print("%s: %.1f s" % (self.name, time.monotonic() - self.t0))
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        sys.exit(0 if self.failed == 0 and self.passed > 0 else 1)


def which(name):
    return shutil.which(name)


def check_every_rank_ok(suite, res, n, label):
    """A job whose every rank ends with an "ok: ..." line: prints the label, exit
    code, time and rank 0's summary (its ok line past the second comma), then
    checks exit 0, no driver timeout and an ok line from each of the n ranks
    (else the first FAIL lines and the output's tail)."""
    lines = res.lines()
    oks = {r: [l for l in ls if l.startswith("ok:")] for r, ls in lines.items()}
    missing = [r for r in range(n) if not oks.get(r)]
    fails = [("[%d] " % r) + l for r, ls in sorted(lines.items()) for l in ls if "FAIL" in l]
    summary = oks[0][0].split(", ", 2)[-1] if oks.get(0) else ""
    print("%s: rc %d, %.1f s%s" % (label, res.rc, res.elapsed, (": " + summary) if summary else ""), flush=True)
    suite.check(res.rc == 0 and not missing and not res.timed_out, label,
                "rc %s%s; ranks without ok: %s\n%s\n%s" % (
                    res.rc, " (driver timeout)" if res.timed_out else "", missing,
                    "\n".join(fails[:8]), res.tail()))
