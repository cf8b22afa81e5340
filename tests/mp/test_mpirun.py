"""Open MPI's mpirun as the launcher: gbCommInitFromEnv reads
OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK. A 4-rank job (2 nvidia + 2 amd, as an
MPMD command line) runs validated all-reduces, once with MASTER_ADDR and
MASTER_PORT exported (-x) and once without (the library derives them).

Without mpirun on PATH it prints "SKIP: mpirun not installed" and exits 77,
unless GB_TEST_REQUIRE_MPI is set: then it fails. `make test` installs
openmpi-bin where it may, and fails when any non-GPU suite skips.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

N = 4
SETTINGS = {"GPUBRIDGE_CHUNK_BYTES": "64K", "GPUBRIDGE_RING_MIN_BYTES": "4K", "GPUBRIDGE_TIMEOUT": "30"}
CASES = ["--allreduce", "0,1,7,33000:float32,bfloat16,int64:sum,max:oi",
         "--allreduce", "33000:float16,float64:avg:i",
         "--broadcast", "7,33000:float32:0,-1:o"]


def mpmd(prog_args, exports=()):
    """-np 2 [-x ...] env GPUBRIDGE_VENDOR=nvidia ... PROG : -np 2 [-x ...] env GPUBRIDGE_VENDOR=amd ... PROG
    (Open MPI applies -x to the application context it stands in, so each gets its own.)"""
    cmd = []
    for vendor in ("nvidia", "amd"):
        if cmd:
            cmd.append(":")
        cmd += ["-np", "2"]
        for e in exports:
            cmd += ["-x", e]
        cmd += ["env", "GPUBRIDGE_VENDOR=" + vendor] + ["%s=%s" % kv for kv in sorted(SETTINGS.items())] + prog_args
    return cmd


def main():
    mpirun = harness.which("mpirun")
    # The real path: Open MPI derives its prefix from it (/bin/mpirun would give "/").
    mpirun = os.path.realpath(mpirun) if mpirun else None
    if not mpirun:
        if "GB_TEST_REQUIRE_MPI" in os.environ:
            print("FAIL: mpirun not installed, but GB_TEST_REQUIRE_MPI is set (install openmpi-bin)")
            print("0 passed, 1 failed")
            sys.exit(1)
        print("SKIP: mpirun not installed")
        sys.exit(77)
    prog = harness.program("rank_collectives")
    if not os.access(prog, os.X_OK):
        print("FAIL: not built: " + prog)
        sys.exit(1)
    suite = harness.Suite("mpirun")
    layout = "nvidia,nvidia,amd,amd"
    env = harness.clean_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    for with_master in (True, False):
        name = "mpirun, MASTER_ADDR/PORT %s" % ("exported" if with_master else "derived by the library")
        exports = ["MASTER_ADDR=127.0.0.1", "MASTER_PORT=%d" % harness.free_port()] if with_master else []
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe"] + \
            mpmd([prog, "--layout", layout, "--seed", "7" if with_master else "8"] + CASES, exports)
        res = harness.run(cmd, env, 180)
        oks = sorted(int(m.group(1)) for m in re.finditer(r"ok: rank (\d+) of 4\b", res.out))
        print("%s: rc %s, %.1f s, ranks ok %s" % (name, res.rc, res.elapsed, oks), flush=True)
        suite.check(res.rc == 0 and oks == list(range(N)) and not res.timed_out, name,
                    "rc %s%s\n%s" % (res.rc, " (driver timeout)" if res.timed_out else "", res.tail()))
    suite.done()


if __name__ == "__main__":
    main()
