#!/usr/bin/env python3
"""Habits brought from other tools work on gpubridge's own.

gpubridge-run: mpirun's -np and torchrun's --nproc-per-node/--nproc_per_node
spellings of -n; OMP_NUM_THREADS=1 for each rank of a job of several when the
user set none, said once on stderr at GPUBRIDGE_DEBUG=INFO only; a value the user
set that gives the ranks more threads than cores, warned of. gpubridge-perf: nccl-tests' -t 1 -g 1 and
the other flags it takes at fixed values (any other value refused with the
reason), -c N check runs, -N N sweeps, a run with no launcher at all as a
job of one rank, and nccl-tests' fp8 names (-d f8e4m3, f8e5m2; -d all holds
them), checked with 0 wrong on 3 simulated ranks for every op.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/mp/test_launcher_habits.py
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PERF = os.path.join(harness.BUILD_DIR, "bin", "gpubridge-perf")
RUN = harness.launcher()
suite = harness.Suite("launcher habits")

# Variables of any launcher: a process started here must see none of them.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                 "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "OMP_NUM_THREADS")
OMP_NOTE = "gpubridge-run: setting OMP_NUM_THREADS=1 for each rank"
OMP_WARNING = "gpubridge-run: warning: OMP_NUM_THREADS="
CORES = len(os.sched_getaffinity(0))  # what the launcher counts


def env(**extra):
    base = {k: None for k in LAUNCHER_VARS}
    base.update(extra)
    return harness.clean_env(**base)


def launch(args, e=None, timeout=60):
    return harness.run([RUN] + args, e if e is not None else env(), timeout)


def perf(args, e=None, timeout=120):
    return harness.run([PERF] + args, e if e is not None else env(GPUBRIDGE_VENDOR="nvidia"), timeout)


def rows(text):
    """The table's rows: (size, count, out-of-place #wrong, in-place #wrong)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 13 and not line.startswith("#") and f[0].isdigit():
            out.append((int(f[0]), int(f[1]), f[8], f[12]))
    return out


def sizes(lo, hi, factor, elem):
    """nccl-tests' sweep for a collective of one part: lo, lo*factor, ... <= hi, whole elements."""
    out, s = [], lo
    while s <= hi:
        out.append((s // elem * elem, s // elem))
        s *= factor
    return out


# ---------------------------------------------------------------- gpubridge-run: -n spellings
def test_rank_count_spellings():
    probe = ["sh", "-c", 'echo "size=$WORLD_SIZE rank=$RANK"']
    for spelling in (["-np", "3"], ["--np", "3"], ["--nproc-per-node", "3"], ["--nproc_per_node", "3"],
                     ["--nproc-per-node=3"], ["--nproc_per_node=3"], ["-n3"]):
        r = launch(spelling + ["--"] + probe)
        lines = r.lines()
        want = {k: ["size=3 rank=%d" % k] for k in range(3)}
        suite.check(r.rc == 0 and lines == want, "gpubridge-run %s starts 3 ranks" % " ".join(spelling),
                    "exit %d, lines %r\n%s" % (r.rc, lines, r.tail()))


def test_rank_count_errors():
    ran = ["sh", "-c", "echo RAN"]
    cases = [(["--nproc-per-node", "gpu"], "--nproc-per-node 'gpu': expected a whole number in 1..1024"),
             (["-np"], "-np needs a number of ranks"),
             (["--nproc_per_node=0"], "--nproc_per_node '0': expected a whole number in 1..1024"),
             (["-np", "3", "--vendors", "nvidia:2,amd:2"],
              "-n 3 disagrees with --vendors 'nvidia:2,amd:2', which names 4 ranks")]
    for args, want in cases:
        r = launch(args + (ran if args != ["-np"] else []))
        suite.check(r.rc == 2 and want in r.err and "usage: gpubridge-run" in r.err and "RAN" not in r.out,
                    "gpubridge-run %s: exit 2 with %r" % (" ".join(args), want),
                    "exit %d, stderr %r" % (r.rc, r.err))


def test_help_names_spellings():
    r = launch(["--help"])
    for word in ("-np N", "--np N", "--nproc-per-node N", "--nproc_per_node N", "OMP_NUM_THREADS=1"):
        suite.check(r.rc == 0 and word in r.out, "gpubridge-run --help mentions %s" % word, r.out)


# ---------------------------------------------------------------- gpubridge-run: OMP_NUM_THREADS
def omp_job(n, given, **extra):
    e = env(**extra) if given is None else env(OMP_NUM_THREADS=given, **extra)
    return launch(["-n", str(n), "--", "sh", "-c", 'echo "omp=${OMP_NUM_THREADS-unset}"'], e)


def test_omp_num_threads():
    for given in (None, ""):  # unset, and empty (which OpenMP ignores)
        r = omp_job(3, given)
        suite.check(r.rc == 0 and r.lines() == {k: ["omp=1"] for k in range(3)},
                    "OMP_NUM_THREADS %r: every rank gets 1" % given, "%r\n%s" % (r.lines(), r.tail()))
        suite.check(r.err == "", "OMP_NUM_THREADS %r: nothing said by default" % given, r.err)
        r = omp_job(3, given, GPUBRIDGE_DEBUG="info")
        notes = [l for l in r.err.splitlines() if l.startswith(OMP_NOTE)]
        suite.check(len(notes) == 1 and "3 ranks" in notes[0] and "set OMP_NUM_THREADS yourself" in notes[0],
                    "OMP_NUM_THREADS %r, GPUBRIDGE_DEBUG=info: one line on stderr says so and how to override"
                    % given, r.err)
    fits = str(max(1, CORES // 2))
    r = omp_job(2, fits)
    suite.check(r.rc == 0 and r.lines() == {0: ["omp=" + fits], 1: ["omp=" + fits]} and r.err == "",
                "OMP_NUM_THREADS=%s on 2 ranks of %d cores is kept, nothing said" % (fits, CORES),
                "%r\n%s" % (r.lines(), r.err))
    over = str(max(2, CORES))
    r = omp_job(2, over)
    warnings = [l for l in r.err.splitlines() if l.startswith(OMP_WARNING)]
    suite.check(r.rc == 0 and r.lines() == {0: ["omp=" + over], 1: ["omp=" + over]} and len(warnings) == 1
                and "%d threads on %d cores" % (2 * int(over), CORES) in warnings[0]
                and "set OMP_NUM_THREADS=%d" % max(1, CORES // 2) in warnings[0],
                "OMP_NUM_THREADS=%s on 2 ranks of %d cores is kept, and warned of with the value to set"
                % (over, CORES), "%r\n%s" % (r.lines(), r.err))
    r = omp_job(1, None)
    suite.check(r.rc == 0 and r.lines() == {0: ["omp=unset"]} and OMP_NOTE not in r.err,
                "one rank: OMP_NUM_THREADS left unset (as torchrun)", "%r\n%s" % (r.lines(), r.err))


# ---------------------------------------------------------------- gpubridge-perf alone
def check_table(r, what, want_sizes, ranks):
    got = rows(r.out)
    suite.check(r.rc == 0, "%s: exit 0" % what, "exit %d\n%s" % (r.rc, r.tail()))
    suite.check([(s, c) for s, c, _, _ in got] == want_sizes, "%s: rows for %s" % (what, want_sizes),
                "got %r\n%s" % (got, r.tail()))
    suite.check(all(w1 == "0" and w2 == "0" for _, _, w1, w2 in got), "%s: nothing wrong" % what, r.tail())
    head = "# gpubridge-perf all_reduce: %d ranks" % ranks
    suite.check(head in r.out, "%s: header says %d ranks" % (what, ranks), r.tail())


def test_perf_alone(tmp):
    path = os.path.join(tmp, "alone.json")
    # nccl-tests' own command line, with a smaller top size.
    r = perf(["all_reduce", "-b", "8", "-e", "1K", "-f", "4", "-g", "1", "-t", "1", "-n", "2", "-J", path])
    check_table(r, "gpubridge-perf with no launcher", sizes(8, 1024, 4, 4), 1)
    suite.check("# one rank: started without a launcher" in r.out, "alone: the header says one rank, no launcher",
                r.tail())
    with open(path) as f:
        meta = json.loads(f.readline())["meta"]
    suite.check(meta.get("alone") is True and meta.get("nranks") == 1, "alone: JSON meta alone true, nranks 1",
                repr(meta))


def test_perf_under_launcher(tmp):
    path = os.path.join(tmp, "launched.json")
    r = harness.run_job(2, [PERF, "all_reduce", "-b", "8", "-e", "256", "-f", "4", "-g", "1", "-t", "1", "-n", "2",
                            "-J", path], env(OMP_NUM_THREADS=1), vendors="nvidia:1,amd:1")
    out = "\n".join(r.lines().get(0, []))
    check_table(harness.Result(r.cmd, r.rc, out, r.err, r.elapsed, r.timed_out), "gpubridge-run -n 2 gpubridge-perf",
                sizes(8, 256, 4, 4), 2)
    suite.check("one rank" not in r.out, "under a launcher: no one-rank line", r.tail())
    with open(path) as f:
        meta = json.loads(f.readline())["meta"]
    suite.check(meta.get("alone") is False, "under a launcher: JSON meta alone false", repr(meta))


def test_perf_other_launcher():
    # An MPI that gpubridge does not read started this process, maybe as one of
    # many: it must not run alone (N separate tables), but say what is missing.
    r = perf(["all_reduce", "-b", "8", "-e", "8", "-n", "1"], env(GPUBRIDGE_VENDOR="nvidia", PMI_RANK=0, PMI_SIZE=2),
             timeout=60)
    suite.check(r.rc == 1 and "no launcher variables found" in r.err and rows(r.out) == [],
                "PMI_RANK set: gbCommInitFromEnv's error, no one-rank run", "exit %d\n%s" % (r.rc, r.tail()))


# ---------------------------------------------------------------- gpubridge-perf: nccl-tests flags
def test_fixed_flags_accepted():
    fixed = ["-t", "1", "-g", "1", "-m", "1", "-p", "1", "-y", "0", "-G", "0", "-C", "0", "-R", "0", "-S", "0",
             "-M", "0", "-x", "0", "-D", "0", "-V", "0", "--ngpus=1", "--nthreads", "1", "--parallel_init", "0"]
    r = perf(["all_reduce", "-b", "64", "-e", "64", "-n", "1"] + fixed)
    check_table(r, "nccl-tests' flags at their fixed values", [(64, 16)], 1)


def test_fixed_flags_refused():
    cases = [
        (["-g", "2"], ["one GPU per process", "gpubridge-run -n 2 --", "mpirun -np 2"]),
        (["-t", "4"], ["one GPU per process", "gpubridge-run -n 4 --", "--nproc-per-node 4"]),
        (["--ngpus=8"], ["-g 8: gpubridge uses one GPU per process", "gpubridge-run -n 8 --"]),
        (["-g", "0"], ["-g 0: gpubridge-perf takes only -g 1 (GPUs per thread)"]),
        (["-g", "two"], ["-g (--ngpus) wants a number; got 'two'"]),
        (["-m", "4"], ["takes only -m 1", "drop -m"]),
        (["-p", "2"], ["takes -p 0 to 1"]),
        (["-y", "1"], ["takes only -y 0", "drop -y"]),
        (["-G", "10"], ["does not capture CUDA graphs", "drop -G"]),
        (["-C", "1"], ["takes only -C 0", "drop -C"]),
        (["-R", "1"], ["no buffer registration", "drop -R"]),
        (["-S", "1"], ["drop -S"]), (["-M", "1"], ["drop -M"]), (["--memory", "1"], ["drop -M"]),
        (["-x", "1"], ["drop -x"]), (["-D", "1"], ["drop -D"]), (["-V", "8"], ["drop -V"]),
        (["-o", "mulsum"], ["does not measure pre-multiplied sums"]),
        (["-d", "f8e4m2"], ["-d wants", "float8e4m3 (f8e4m3)", "got 'f8e4m2'"]),
        (["-N", "0"], ["-N 0 (run until killed) is not supported"]),
        (["-c", "-1"], ["-c wants a number of check runs"]),
        (["-N", "2", "--tune", "/nonexistent/never-written"], ["--tune measures once; drop -N"]),
        (["-q", "1"], ["unknown flag '-q'"]),
    ]
    for args, wants in cases:
        r = perf(["all_reduce", "-b", "8", "-e", "8"] + args, timeout=30)
        ok = r.rc == 2 and all(w in r.err for w in wants) and "run gpubridge-perf -h" in r.err and not r.out
        suite.check(ok, "gpubridge-perf %s: exit 2 saying %r" % (" ".join(args), wants),
                    "exit %d, stderr %r" % (r.rc, r.err))
    # Refused on every rank before init: the launcher ends at once with 2.
    r = harness.run_job(2, [PERF, "all_reduce", "-g", "2"], env(OMP_NUM_THREADS=1), timeout=60)
    suite.check(r.rc == 2 and "gpubridge-run -n 2 --" in r.err, "gpubridge-run -n 2 gpubridge-perf -g 2: exit 2",
                "exit %d\n%s" % (r.rc, r.tail()))


def test_check_runs_and_cycles(tmp):
    path = os.path.join(tmp, "cycles.json")
    r = perf(["all_reduce", "-b", "8", "-e", "128", "-f", "4", "-n", "1", "-c", "3", "-N", "2", "-J", path])
    want = sizes(8, 128, 4, 4)
    check_table(r, "-c 3 -N 2", want * 2, 1)
    suite.check("validation: 3" in r.out, "-c 3: the header says validation: 3", r.tail())
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    meta = lines[0].get("meta", {})
    suite.check(meta.get("check") == 3 and meta.get("cycles") == 2 and len(lines) == 1 + 2 * len(want),
                "-c 3 -N 2: JSON meta check 3, cycles 2, %d rows" % (2 * len(want)),
                "meta %r, %d lines" % (meta, len(lines)))
    r = perf(["all_reduce", "-b", "8", "-e", "8", "-n", "1", "-c", "0"])
    got = rows(r.out)
    suite.check(r.rc == 0 and len(got) == 1 and got[0][2] == "N/A" and got[0][3] == "N/A",
                "-c 0: no check, #wrong N/A", r.tail())


def test_fp8_types():
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        r = harness.run_job(3, [PERF, coll, "-b", "8", "-e", "4096", "-f", "8", "-d", "all", "-o", "all", "-c", "1",
                                "-n", "1", "-w", "0"], env(OMP_NUM_THREADS=1), vendors="nvidia:2,amd:1", timeout=120)
        fp8 = [l.split() for l in r.out.splitlines() if " f8e4m3 " in l or " f8e5m2 " in l]
        # after the type: op, root, then time, algbw, busbw, #wrong out of place and in place
        at = [next(i for i, x in enumerate(f) if x in ("f8e4m3", "f8e5m2")) for f in fp8]
        wrong = [f for f, i in zip(fp8, at) if f[i + 6] != "0" or f[i + 10] != "0"]
        want = 2 * 4 * (5 if coll != "all_gather" else 1)  # types x sizes x ops
        suite.check(r.rc == 0 and len(fp8) == want and not wrong,
                    "%s -d all: %d rows of f8e4m3 and f8e5m2, 0 wrong" % (coll, want),
                    "exit %d, %d rows, wrong %r\n%s" % (r.rc, len(fp8), wrong[:3], r.tail()))
    r = perf(["all_reduce", "-b", "8", "-e", "8", "-n", "1", "-d", "float8e5m2", "-o", "prod"])
    suite.check(r.rc == 0 and len(rows(r.out)) == 1 and " f8e5m2 " in r.out, "-d float8e5m2 names f8e5m2", r.tail())


harness.require_built()
with tempfile.TemporaryDirectory() as tmp:
    test_rank_count_spellings()
    test_rank_count_errors()
    test_help_names_spellings()
    test_omp_num_threads()
    test_perf_alone(tmp)
    test_perf_under_launcher(tmp)
    test_perf_other_launcher()
    test_fixed_flags_accepted()
    test_fixed_flags_refused()
    test_check_runs_and_cycles(tmp)
    test_fp8_types()
suite.done()
