#!/usr/bin/env python3
"""gpubridge-run, the local launcher: environment per rank, tagged output,
exit statuses, stopping the job, timeouts, signals, bad usage.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/mp/test_run.py
Every expected value is computed here; every subprocess call has a timeout.
"""
import os
import re
import signal
import subprocess
import sys
import socket
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from ports import free_port  # noqa: E402 (tests/ports.py)

BUILD = os.environ.get("GB_TEST_BUILD_DIR", "")
RUN = os.path.join(BUILD, "bin", "gpubridge-run")
CALL_TIMEOUT = 60  # seconds: no single launcher call may take longer

# A rank program for the scenarios that need ranks to coordinate. Waiting is
# always for a condition, polled against a deadline.
HELPER = r'''
import os, signal, sys, time
rank = int(os.environ["RANK"])
size = int(os.environ["WORLD_SIZE"])
mode, d = sys.argv[1], sys.argv[2]

def publish_pid():
    tmp = os.path.join(d, "pid.%d.tmp" % rank)
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.rename(tmp, os.path.join(d, "pid.%d" % rank))

def wait_for(pred, what, limit=30.0):
    deadline = time.monotonic() + limit
    while not pred():
        if time.monotonic() > deadline:
            sys.stderr.write("helper rank %d: gave up waiting for %s\n" % (rank, what))
            sys.exit(99)
        time.sleep(0.01)

def read_pid(r):
    with open(os.path.join(d, "pid.%d" % r)) as f:
        return int(f.read())

def state(pid):
    # Reaped before the open (no file) or between the open and the read (ESRCH): gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None

def others_published():
    return all(os.path.exists(os.path.join(d, "pid.%d" % r)) for r in range(1, size))

def long_job():
    os.execvp("sleep", ["sleep", "1000"])

if mode == "sleep":                      # every rank: a long job
    publish_pid(); long_job()
elif mode == "kill-self":                # rank 0 dies by SIGKILL once the others run
    if rank == 0:
        wait_for(others_published, "the other ranks' pids")
        os.kill(os.getpid(), signal.SIGKILL)
    publish_pid(); long_job()
elif mode == "stop-one":                 # ranks 1, 2 stop themselves; rank 0 then fails
    if rank == 0:
        wait_for(others_published, "the other ranks' pids")
        wait_for(lambda: all(state(read_pid(r)) == "T" for r in range(1, size)), "ranks stopped")
        sys.exit(5)
    if rank == 2:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by sleep: needs SIGKILL
    publish_pid()
    os.kill(os.getpid(), signal.SIGSTOP)
    long_job()
elif mode == "keep-going":               # rank 0 fails first; 1 and 2 end after it is reaped
    if rank == 0:
        publish_pid(); sys.exit(3)
    wait_for(lambda: os.path.exists(os.path.join(d, "pid.0")), "rank 0's pid")
    pid0 = read_pid(0)
    wait_for(lambda: state(pid0) is None, "rank 0 to be reaped")
    print("late output from rank %d" % rank, flush=True)
    sys.exit(4 if rank == 2 else 0)
elif mode == "lines":                    # many lines, each written in several pieces
    for fd, count in ((1, 2000), (2, 300)):
        for i in range(count):
            os.write(fd, b"r%d line%d " % (rank, i))
            os.write(fd, b"x" * (i * 7 % 300))
            os.write(fd, b" end\n")
        for k in range(200):             # one 200 kB line, larger than a pipe
            os.write(fd, b"L" * 1000)
        os.write(fd, b"\n")
'''

failures = []


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(args, env=None, timeout=CALL_TIMEOUT):
    """Runs the launcher; returns (rc, stdout, stderr, seconds)."""
    full_env = dict(os.environ)
    full_env.pop("GPUBRIDGE_VENDOR", None)
    full_env.pop("GPUBRIDGE_JOB_SECRET", None)
    # Given, so that stderr holds only what these tests look for (the line
    # said when it is not set is tested in test_launcher_habits.py).
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    t0 = time.monotonic()
    try:
        p = subprocess.run([RUN] + args, env=full_env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail("gpubridge-run %s did not end within %d s" % (" ".join(args), timeout))
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def helper_args(tmp, mode):
    return [sys.executable, os.path.join(tmp, "helper.py"), mode, tmp]


def wait_for(pred, what, limit=30.0):
    deadline = time.monotonic() + limit
    while not pred():
        if time.monotonic() > deadline:
            raise Fail("gave up waiting for " + what)
        time.sleep(0.01)


def rank_pids(tmp, ranks):
    pids = []
    for r in ranks:
        with open(os.path.join(tmp, "pid.%d" % r)) as f:
            pids.append(int(f.read()))
    return pids


def alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def tagged(out):
    """{rank: [line, ...]} from tagged output; every line must carry a tag."""
    by_rank = {}
    for line in out.splitlines():
        m = re.fullmatch(r"\[(\d+)\] (.*)", line)
        check(m is not None, "untagged output line %r" % line)
        by_rank.setdefault(int(m.group(1)), []).append(m.group(2))
    return by_rank


def expand_vendors(spec):
    """The test's own reading of --vendors: LABEL[:COUNT] items in rank order."""
    labels = []
    for item in spec.split(","):
        label, _, count = item.partition(":")
        labels += [label] * (int(count) if count else 1)
    return labels


ENV_PROBE = ["sh", "-c", "echo $RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT "
             "${GPUBRIDGE_VENDOR:-unset} ${#GPUBRIDGE_JOB_SECRET} $LOCAL_WORLD_SIZE $GROUP_RANK"]


def check_env(args, vendors, n, port=None, env=None):
    rc, out, err, _ = run(args + ENV_PROBE, env=env)
    check(rc == 0, "env probe %s: exit %d, stderr %r" % (args, rc, err))
    by_rank = tagged(out)
    check(sorted(by_rank) == list(range(n)), "ranks seen %s, want 0..%d" % (sorted(by_rank), n - 1))
    ports = set()
    for r in range(n):
        check(len(by_rank[r]) == 1, "rank %d printed %r" % (r, by_rank[r]))
        f = by_rank[r][0].split(" ")
        vendor = vendors[r] if vendors else "unset"
        want = [str(r), str(n), str(r), "127.0.0.1", None, vendor, "64", str(n), "0"]
        check(len(f) == len(want), "rank %d: %r, want %d fields" % (r, by_rank[r][0], len(want)))
        for i, w in enumerate(want):
            if w is not None:
                check(f[i] == w, "rank %d field %d is %r, want %r (line %r)" % (r, i, f[i], w, by_rank[r][0]))
        ports.add(int(f[4]))
    check(len(ports) == 1, "ranks saw different MASTER_PORTs %s" % ports)
    p = ports.pop()
    check(1 <= p <= 65535, "MASTER_PORT %d out of range" % p)
    if port is not None:
        check(p == port, "MASTER_PORT %d, want --port %d" % (p, port))
    else:
        # Drawn below the kernel's ephemeral range, where no outgoing
        # connection can take it before rank 0 listens.
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
        check(p < low, "default MASTER_PORT %d is in the ephemeral range (from %d)" % (p, low))


def test_env_vendor_blocks():
    spec = "nvidia:2,amd:2"
    check_env(["--vendors", spec, "--"], expand_vendors(spec), 4)
    check_env(["-n", "4", "--vendors", spec], expand_vendors(spec), 4, port=None)


def test_env_vendor_per_rank():
    spec = "nvidia,amd,nvidia,amd"
    check_env(["-n", "4", "--vendors", spec, "--"], ["nvidia", "amd", "nvidia", "amd"], 4)
    spec = "nvidia:1,amd:2,intel"
    check_env(["--vendors", spec], ["nvidia", "amd", "amd", "intel"], 4)


def test_env_without_vendors():
    port = free_port()
    check_env(["-n", "3", "--port", str(port)], None, 3, port=port)
    # GPUBRIDGE_VENDOR left as inherited without --vendors, replaced with it.
    check_env(["-n", "2"], ["amd", "amd"], 2, env={"GPUBRIDGE_VENDOR": "amd"})
    check_env(["--vendors", "nvidia:2"], ["nvidia", "nvidia"], 2, env={"GPUBRIDGE_VENDOR": "amd"})


def test_port_in_use(tmp):
    """--port P where another program listens on 127.0.0.1:P: refused before
    any rank starts (rank 0 could not host the rendezvous there), naming the
    port and how to find who holds it."""
    marker = os.path.join(tmp, "started")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", free_port()))
        holder.listen(1)
        port = holder.getsockname()[1]
        rc, out, err, took = run(["-n", "2", "--port", str(port), "--", "sh", "-c", "touch " + marker])
    check(rc == 1, "--port %d in use: exit %d, want 1 (stderr %r)" % (port, rc, err))
    check(not os.path.exists(marker), "--port %d in use: a rank was started" % port)
    want = "gpubridge-run: --port %d: the port is in use on 127.0.0.1" % port
    check(want in err and "no rank was started" in err and "ss -ltnp 'sport = :%d'" % port in err,
          "--port %d in use: stderr %r, want %r, 'no rank was started' and the ss command" % (port, err, want))


def test_job_secret():
    probe = ["sh", "-c", "echo $GPUBRIDGE_JOB_SECRET"]
    secrets = []
    for _ in range(2):
        rc, out, err, _ = run(["-n", "3"] + probe)
        check(rc == 0, "secret probe: exit %d, %r" % (rc, err))
        seen = {line for lines in tagged(out).values() for line in lines}
        check(len(seen) == 1, "ranks saw different secrets %s" % seen)
        s = seen.pop()
        check(re.fullmatch(r"[0-9a-f]{64}", s) is not None, "secret %r is not 64 hex digits" % s)
        secrets.append(s)
    check(secrets[0] != secrets[1], "two jobs got the same secret %s" % secrets[0])
    rc, out, err, _ = run(["-n", "2"] + probe, env={"GPUBRIDGE_JOB_SECRET": "given-secret"})
    check(tagged(out) == {0: ["given-secret"], 1: ["given-secret"]}, "a set secret was not kept: %r" % out)


def test_tags_stdout_stderr():
    rc, out, err, _ = run(["-n", "3", "sh", "-c", "echo out$RANK; echo err$RANK >&2"])
    check(rc == 0, "exit %d, stderr %r" % (rc, err))
    check(tagged(out) == {r: ["out%d" % r] for r in range(3)}, "stdout %r" % out)
    check(tagged(err) == {r: ["err%d" % r] for r in range(3)}, "stderr %r" % err)


def test_partial_last_line():
    rc, out, err, _ = run(["-n", "2", "sh", "-c", 'printf "a$RANK\\nb$RANK"; printf "c$RANK" >&2'])
    check(rc == 0, "exit %d, stderr %r" % (rc, err))
    check(out.endswith("\n"), "tagged output must end its lines: %r" % out)
    check(tagged(out) == {r: ["a%d" % r, "b%d" % r] for r in range(2)}, "stdout %r" % out)
    check(tagged(err) == {r: ["c%d" % r] for r in range(2)}, "stderr %r" % err)


def test_no_tag():
    rc, out, err, _ = run(["-n", "2", "--no-tag", "sh", "-c", "echo plain$RANK"])
    check(rc == 0, "exit %d" % rc)
    check(sorted(out.splitlines()) == ["plain0", "plain1"], "stdout %r" % out)
    rc, out, err, _ = run(["-n", "1", "--no-tag", "sh", "-c", 'printf "a\\nb"'])
    check(out == "a\nb", "--no-tag must pass bytes unchanged, got %r" % out)


def test_whole_lines(tmp):
    n = 3
    rc, out, err, _ = run(["-n", str(n)] + helper_args(tmp, "lines"))
    check(rc == 0, "exit %d, stderr tail %r" % (rc, err[-500:]))
    for text, count, name in ((out, 2000, "stdout"), (err, 300, "stderr")):
        by_rank = tagged(text)
        for r in range(n):
            want = ["r%d line%d %s end" % (r, i, "x" * (i * 7 % 300)) for i in range(count)]
            want.append("L" * 200000)
            got = by_rank.get(r, [])
            check(len(got) == len(want), "%s rank %d: %d lines, want %d" % (name, r, len(got), len(want)))
            for i, (g, w) in enumerate(zip(got, want)):
                check(g == w, "%s rank %d line %d: %r, want %r" % (name, r, i, g[:80], w[:80]))


def test_exit_status():
    rc, out, err, _ = run(["-n", "4", "sh", "-c", "exit 0"])
    check(rc == 0 and err == "", "all ranks exit 0: exit %d, stderr %r" % (rc, err))
    rc, out, err, _ = run(["-n", "4", "sh", "-c", '[ "$RANK" = 2 ] && exit 3; exit 0'])
    check(rc == 3, "a rank exiting 3: launcher exit %d, want 3" % rc)
    check("gpubridge-run: rank 2 exited with status 3" in err, "stderr %r" % err)


def test_sigkill_stops_others(tmp):
    rc, out, err, secs = run(["-n", "3"] + helper_args(tmp, "kill-self"))
    check(rc == 137, "rank killed by SIGKILL: launcher exit %d, want %d; stderr %r" % (rc, 128 + 9, err))
    check("gpubridge-run: rank 0 was killed by signal SIGKILL; stopping the other ranks" in err,
          "stderr %r" % err)
    check(secs < 5, "launcher took %.1f s to stop the others, want < 5" % secs)
    for pid in rank_pids(tmp, [1, 2]):
        check(not alive(pid), "rank process %d survived the launcher" % pid)


def test_stopped_rank_is_killed(tmp):
    rc, out, err, secs = run(["-n", "3"] + helper_args(tmp, "stop-one"))
    check(rc == 5, "launcher exit %d, want 5; stderr %r" % (rc, err))
    check("gpubridge-run: rank 0 exited with status 5; stopping the other ranks" in err, "stderr %r" % err)
    # Rank 2 ignores SIGTERM: it ends only by SIGKILL after the 3 s grace.
    check("1 rank(s) still running 3 s after SIGTERM; killing them" in err, "stderr %r" % err)
    check(2.9 <= secs < 8, "launcher took %.1f s, want about 3" % secs)
    for pid in rank_pids(tmp, [1, 2]):
        check(not alive(pid), "stopped rank process %d survived the launcher" % pid)


def test_keep_going(tmp):
    rc, out, err, _ = run(["-n", "3", "--keep-going"] + helper_args(tmp, "keep-going"))
    check(rc == 3, "--keep-going: exit %d, want the first failure's 3; stderr %r" % (rc, err))
    check(tagged(out) == {1: ["late output from rank 1"], 2: ["late output from rank 2"]},
          "the others' output after rank 0 failed: %r" % out)
    lines = [l for l in err.splitlines() if l.startswith("gpubridge-run:")]
    check(lines == ["gpubridge-run: rank 0 exited with status 3", "gpubridge-run: rank 2 exited with status 4"],
          "failure lines %r" % lines)


def test_timeout():
    rc, out, err, secs = run(["-n", "2", "--timeout", "1", "sleep", "1000"])
    check(rc == 124, "--timeout: exit %d, want 124" % rc)
    check("gpubridge-run: job still running after 1 s; stopping it" in err, "stderr %r" % err)
    check(1 <= secs < 5, "--timeout 1 took %.1f s" % secs)
    rc, out, err, secs = run(["-n", "2", "--timeout", "30", "true"])
    check(rc == 0 and secs < 10, "a job within its timeout: exit %d after %.1f s" % (rc, secs))


def signal_launcher(tmp, sig, want_rc):
    env = dict(os.environ)
    env.pop("GPUBRIDGE_JOB_SECRET", None)
    # The launcher must see SIGINT even when this test was started with it ignored.
    p = subprocess.Popen([RUN, "-n", "3"] + helper_args(tmp, "sleep"), env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(lambda: all(os.path.exists(os.path.join(tmp, "pid.%d" % r)) for r in range(3)),
                 "the ranks to start")
        pids = rank_pids(tmp, range(3))
        t0 = time.monotonic()
        if sig is None:
            p.kill()  # the launcher dies at once: the ranks must follow it
            p.communicate(timeout=CALL_TIMEOUT)
            wait_for(lambda: not any(alive(pid) for pid in pids), "ranks to die with the launcher", 5)
            return
        p.send_signal(sig)
        out, err = p.communicate(timeout=CALL_TIMEOUT)
        secs = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=CALL_TIMEOUT)
    name = signal.Signals(sig).name
    check(p.returncode == want_rc, "%s: launcher exit %d, want %d" % (name, p.returncode, want_rc))
    check(("received %s" % name) in err.decode(), "stderr %r" % err)
    check(secs < 5, "%s: the launcher took %.1f s to stop" % (name, secs))
    for pid in pids:
        check(not alive(pid), "%s: rank process %d survived the launcher" % (name, pid))


def test_sigint(tmp):
    signal_launcher(tmp, signal.SIGINT, 130)


def test_sigterm(tmp):
    signal_launcher(tmp, signal.SIGTERM, 143)


def test_launcher_killed(tmp):
    signal_launcher(tmp, None, None)


def test_bad_usage():
    ran = ["sh", "-c", "echo RAN"]
    cases = [
        [], ["-n", "2"], ["-n", "2", "--"], ran, ["-n", "0"] + ran, ["-n", "x"] + ran, ["-n"],
        ["--vendors", "NVIDIA:2"] + ran, ["--vendors", "nvidia:0"] + ran, ["--vendors", "nvidia:"] + ran,
        ["--vendors", "nvidia,,amd"] + ran, ["--vendors", ""] + ran, ["--vendors", "a" * 16] + ran,
        ["--vendors", "nv idia"] + ran, ["--vendors", "nvidia:2x"] + ran,
        ["-n", "3", "--vendors", "nvidia:2,amd:2"] + ran, ["-n", "2", "--timeout", "0"] + ran,
        ["-n", "2", "--timeout", "soon"] + ran, ["-n", "2", "--port", "70000"] + ran,
        ["-n", "2", "--bogus"] + ran,
    ]
    for args in cases:
        rc, out, err, _ = run(args)
        check(rc == 2, "%r: exit %d, want 2" % (args, rc))
        check("usage: gpubridge-run" in err, "%r: no usage on stderr: %r" % (args, err))
        check(re.search(r"^gpubridge-run: ", err, re.M) is not None, "%r: no message: %r" % (args, err))
        check("RAN" not in out, "%r: the program ran despite bad usage" % (args,))
    # A label of 15 characters is the longest allowed.
    rc, out, err, _ = run(["--vendors", "a" * 15, "true"])
    check(rc == 0, "a 15-character label was refused: %r" % err)


def test_cannot_run(tmp):
    prog = "/nonexistent/gb-no-such-program"
    rc, out, err, _ = run(["-n", "2", prog])
    check(rc == 127, "missing program: exit %d, want 127" % rc)
    check("gpubridge-run: cannot run %s: No such file or directory" % prog in err, "stderr %r" % err)
    noexec = os.path.join(tmp, "not-executable")
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\n")
    rc, out, err, _ = run(["-n", "1", noexec])
    check(rc == 127, "non-executable program: exit %d, want 127" % rc)
    check("cannot run %s: Permission denied" % noexec in err, "stderr %r" % err)


def main():
    if not BUILD or not os.access(RUN, os.X_OK):
        print("test_run: %r is not an executable; set GB_TEST_BUILD_DIR to the build folder" % RUN)
        return 1
    tests = [(k, v) for k, v in globals().items() if k.startswith("test_") and callable(v)]
    for name, fn in tests:
        with tempfile.TemporaryDirectory(prefix="gb-test-run-") as tmp:
            with open(os.path.join(tmp, "helper.py"), "w") as f:
                f.write(HELPER)
            t0 = time.monotonic()
            try:
                fn(tmp) if fn.__code__.co_argcount else fn()
                print("ok   %s (%.1f s)" % (name, time.monotonic() - t0), flush=True)
            except Fail as e:
                failures.append(name)
                print("FAIL %s: %s" % (name, e), flush=True)
    if failures:
        print("test_run: %d of %d failed: %s" % (len(failures), len(tests), ", ".join(failures)))
        return 1
    print("test_run: all %d passed" % len(tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
