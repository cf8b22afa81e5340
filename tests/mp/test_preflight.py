"""gpubridge-info --preflight, on this machine and across the emulated hosts
of hosts.py (every host's interface gb0).

- Here: every check has a line ("check status text") and the last line is
  the verdict, PASS with exit 0; GPUBRIDGE_SOCKET_IFNAME naming no interface
  FAILs naming it, exit 1; --peers with only loopback to listen on FAILs.
- Two hosts, the same command on each (--peers localhost and both
  addresses): each skips its own entries, reaches the other and is reached
  by it: PASS on both.
- Three hosts with the preflight running on two: both FAIL within --wait,
  naming the third host's address and counting 1 of 2 peers in.
- Bad options are refused with usage (exit 2).

    python3 tests/mp/test_preflight.py
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import hosts  # noqa: E402

LINE = re.compile(r"^(\S+(?: \S+)?)\s+(ok|WARN|FAIL)\s+\S")


def info():
    return os.path.join(harness.BUILD_DIR, "bin", "gpubridge-info")


def run(args, env, prefix=(), timeout=60):
    t0 = time.monotonic()
    p = subprocess.run(list(prefix) + [info()] + args, env=env, capture_output=True, text=True,
                       timeout=harness.scaled(timeout))
    return p.returncode, p.stdout.splitlines(), time.monotonic() - t0


def start(args, env, prefix):
    return subprocess.Popen(list(prefix) + [info()] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def verdict(lines):
    return lines[-1] if lines else ""


def here(suite):
    rc, lines, _ = run(["--preflight"], harness.clean_env())
    body = lines[:-1]
    suite.check(rc == 0 and verdict(lines).startswith("preflight: PASS"), "here: PASS, exit 0",
                "rc %d\n%s" % (rc, "\n".join(lines)))
    names = [LINE.match(l).group(1) for l in body if LINE.match(l)]
    suite.check(len(names) == len(body) and {"library", "device", "settings", "interface", "memlock", "open files",
                                              "clock"} <= set(names),
                "here: one 'check status text' line per check", "\n".join(lines))
    m = re.search(r"PASS \((\d+) checks, (\d+) warnings\)", verdict(lines))
    suite.check(m and int(m.group(1)) == len(body) and int(m.group(2)) == sum(" WARN " in l for l in body),
                "here: the verdict counts the checks and warnings", "\n".join(lines))
    rc, lines, _ = run(["--preflight"], harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="=ib7"))
    suite.check(rc == 1 and verdict(lines).startswith("preflight: FAIL") and "interface:" in verdict(lines) and
                "ib7" in verdict(lines), "GPUBRIDGE_SOCKET_IFNAME=ib7: FAIL naming it, exit 1", "\n".join(lines))
    rc, lines, _ = run(["--preflight", "--peers", "10.214.0.9", "--wait", "1"],
                       harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo"))
    suite.check(rc == 1 and "loopback" in verdict(lines), "--peers with loopback only: FAIL saying so",
                "\n".join(lines))
    for bad in (["--peers", "a,b"], ["--preflight", "--port", "0"], ["--preflight", "--wait", "x"],
                ["--preflight", "-c"]):
        rc, _, _ = run(bad, harness.clean_env())
        suite.check(rc == 2, "refused: gpubridge-info %s (exit 2)" % " ".join(bad), "rc %d" % rc)


def across(suite, nhosts, running, wait, extra_peers=()):
    rig = hosts.Rig(nhosts).up()
    try:
        env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME=hosts.IFNAME)
        args = ["--preflight", "--peers", ",".join(list(extra_peers) + rig.addrs), "--port", "29551",
                "--wait", str(wait)]
        t0 = time.monotonic()
        procs = [start(args, env, rig.on(h)) for h in range(running)]
        outs = [p.communicate(timeout=harness.scaled(wait + 30)) for p in procs]
        took = time.monotonic() - t0
    finally:
        rig.down()
    return rig, [(p.returncode, o[0].splitlines()) for p, o in zip(procs, outs)], took


def two_hosts(suite):
    rig, res, took = across(suite, 2, 2, 20, extra_peers=["localhost"])  # an own address too
    for h, (rc, lines) in enumerate(res):
        other = rig.addrs[1 - h]
        ok = [l for l in lines if l.startswith("peer ") and " ok " in l and other + ":29551 reached" in l]
        suite.check(rc == 0 and verdict(lines).startswith("preflight: PASS") and ok and
                    any(l.startswith("peers in") and " ok " in l for l in lines),
                    "two hosts: host %d reaches %s, is reached, PASS" % (h, other), "\n".join(lines))
        suite.check(any(l.startswith("listen") and "1 peer (2 entries of --peers are this node)" in l for l in lines),
                    "two hosts: host %d skips its own entries (its address, localhost)" % h, "\n".join(lines))
    suite.check(took < 15, "two hosts: done in %.1f s, not at --wait" % took)


def one_missing(suite):
    rig, res, took = across(suite, 3, 2, 2)
    for h, (rc, lines) in enumerate(res):
        v = verdict(lines)
        suite.check(rc == 1 and v.startswith("preflight: FAIL") and rig.addrs[2] + ":29551 not reached" in v,
                    "three hosts, two running: host %d FAILs naming %s" % (h, rig.addrs[2]), "\n".join(lines))
        suite.check(any(l.startswith("peers in") and "1 of 2 peers" in l for l in lines),
                    "three hosts, two running: host %d counts 1 of 2 peers in" % h, "\n".join(lines))
    suite.check(took < 2 + 10, "three hosts, two running: ends at --wait (%.1f s)" % took)


def main():
    suite = harness.Suite("preflight")
    if not os.access(info(), os.X_OK):
        suite.check(False, "gpubridge-info is built", info())
        suite.done()
    here(suite)
    why = hosts.unavailable()
    suite.check(why is None, "the emulated hosts can be built here", why or "")
    if why is None:
        two_hosts(suite)
        one_missing(suite)
    suite.done()


if __name__ == "__main__":
    main()
