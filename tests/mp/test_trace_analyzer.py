"""gpubridge-info --trace DIR on synthetic flight-recorder dumps.

    python3 tests/mp/test_trace_analyzer.py [--only CASE] [--keep]

Each case writes the dumps a job would leave (schema gpubridge-trace/1, as
docs/TRACE.md describes it: one gpubridge-trace-<id>-r<rank>.json per rank
that dumped) from a scenario: the calls every rank made, how far each got,
and the error each saw. The expected verdict line is computed here from the
scenario (who is at fault and why), not from the analyzer's output, and the
analyzer's last line must equal it exactly. Cases (world nvidia:2,amd:2,
calls 1..8 with counts 1000+i, victim at call 5 unless said):
  stop          rank 2 SIGSTOPped: no dump; the others time out naming it
  kill          rank 1 SIGKILLed: no dump; the others see its connections close
  skip-check    rank 3 leaves out call 5, call check on: every rank fails at #5
  skip-nocheck  the same with the check off: timeouts, the victim dumped on the signal
  skip-last     rank 0 leaves out call 8: idle after #7, the others wait in #8
  count         rank 2 calls #5 with half the count
  tie           ranks 0,1 and ranks 2,3 disagree on #5's count
  extra         rank 1 makes a broadcast the others do not make, before call 5
  clean         every rank finished every call (dumped on the signal)
  continued     rank 3 named by the others' timeouts, but continued and dumped later
  p2p           a 2-rank job hung in a send/recv group on a stopped peer
  busy          every rank inside #7, nobody failed (dumped on the signal)
  own           no stall or death: the earliest own error is quoted (160 characters)
  empty         no dump in the directory: exit 2, naming GPUBRIDGE_TRACE_DIR
  corrupt       a rank's dump cut short and a non-dump .json: reported with line and
                column, skipped; the verdict still names the victim; a directory of
                only bad dumps exits 1; a document nested too deep is refused
  two-comms     a world communicator and a split of it fail, and a third is quiet:
                the verdict is that of the communicator with the earliest error
No job runs; only the built gpubridge-info is needed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import trials  # noqa: E402

GB_TIMEOUT, GB_REMOTE, GB_USAGE = 8, 6, 5
NAMES = {GB_TIMEOUT: "gbTimeout", GB_REMOTE: "gbRemoteError", GB_USAGE: "gbInvalidUsage"}
VENDORS = ["nvidia", "nvidia", "amd", "amd"]
WALL0 = 1730000000000000000
MONO0 = 5000000000


def info():
    return os.path.join(harness.BUILD_DIR, "bin", "gpubridge-info")


def islands(vendors):
    out, seen = [], {}
    for r, v in enumerate(vendors):
        if v not in seen:
            seen[v] = len(out)
            out.append({"index": len(out), "vendor": v, "leader": r, "ranks": []})
        out[seen[v]]["ranks"].append(r)
    return out


def call(count, coll="all_reduce", dtype="float32", op="sum", root=None):
    return {"coll": coll, "count": count, "dtype": dtype,
            "op": op if coll in ("all_reduce", "reduce", "reduce_scatter") else None,
            "root": root if coll in ("broadcast", "reduce") else None}


def standard_calls(n=8):
    return [call(1000 + i) for i in range(1, n + 1)]


def record(seq, c, state, phase, t0):
    t = {"enqueued": t0, "checkBegin": t0 + 1000, "checkEnd": t0 + 5000, "staged": t0 + 6000,
         "bridgeBegin": t0 + 7000, "bridgeEnd": t0 + 9000, "done": t0 + 12000}
    reached = ["enqueued", "checkBegin", "checkEnd", "staged", "bridgeBegin", "bridgeEnd", "done"]
    upto = {"queued": 1, "check": 2, "island": 3, "staged": 4, "bridge": 5, "copy-back": 6,
            "done": 7, "failed": 6}[phase]
    for k in reached[upto:]:
        t[k] = None
    nbytes = c["count"] * (2 if c["dtype"] in ("float16", "bfloat16") else 4)
    return {"seq": seq, "p2pSeq": 0, "coll": c["coll"], "count": c["count"], "dtype": c["dtype"],
            "op": c["op"], "root": c["root"], "peer": None, "npeers": 0, "policy": "hierarchical",
            "nchunks": 1, "chunksBridged": 1 if phase in ("copy-back", "done") else 0, "hostStep": True,
            "check": True, "state": state, "phase": phase,
            "result": {"done": 0, "failed": GB_TIMEOUT}.get(state, 0), "t": t,
            "bytes": {"world": 0, "bridge": nbytes if phase in ("copy-back", "done") else 0, "rail": 0,
                      "island": nbytes},
            "deviceDone": False}


def rank_dump(comm_id, rank, vendors, calls, done, stuck_phase="bridge", failed=False, error=None,
              reason=None):
    """One rank's dump: calls[0:done] done, the rest in flight (the first in
    stuck_phase, the others queued behind it), or failed when failed."""
    recs = []
    for i, c in enumerate(calls):
        seq = i + 1
        if i < done:
            recs.append(record(seq, c, "done", "done", MONO0 + seq * 100000))
        elif failed:
            recs.append(record(seq, c, "failed", "failed", MONO0 + seq * 100000))
        else:
            recs.append(record(seq, c, "in-flight", stuck_phase if i == done else "queued",
                               MONO0 + seq * 100000))
    inflight = [r["seq"] for r in recs if r["state"] == "in-flight"]
    last_completed = 0
    for r in recs:
        if r["state"] != "done":
            break
        last_completed = r["seq"]
    isl = islands(vendors)
    my_island = next(i["index"] for i in isl if rank in i["ranks"])
    byColl = {}
    for r in recs:
        if r["state"] == "done":
            byColl[r["coll"]] = byColl.get(r["coll"], 0) + 1
    return {
        "schema": "gpubridge-trace/1", "library": "0.1.0",
        "reason": reason or ("signal" if error is None else
                             "timeout" if error["code"] == GB_TIMEOUT else
                             "peer-failure" if error["faultRank"] != rank else "error"),
        "pid": 1000 + rank, "host": "h1", "wallNs": WALL0 + 10 ** 10, "monoNs": MONO0 + 10 ** 10,
        "comm": {"id": comm_id, "rank": rank, "nranks": len(vendors), "island": my_island,
                 "isLeader": any(i["leader"] == rank for i in isl), "runKind": "simulated",
                 "policy": "hierarchical", "checkCalls": True, "timeoutSec": 3, "islands": isl},
        "error": error,
        "ring": {"capacity": 2048, "recorded": len(recs), "unrecorded": 0},
        "state": {"lastEnqueued": len(calls), "lastCompleted": last_completed, "lastP2p": 0,
                  "inside": inflight[0] if inflight else None},
        "counters": {"enqueued": len(recs), "completed": last_completed, "failed": 0, "latencyNs": 12000 * done,
                     "byColl": byColl, "bytes": {"world": 0, "bridge": 0, "rail": 0, "island": 0},
                     "busyNs": {"world": 0, "bridge": 0, "rail": 0}},
        "records": recs,
    }


def error(code, fault, seen_by, at_ms, text):
    return {"code": code, "name": NAMES[code], "text": text, "faultRank": fault, "seenBy": seen_by,
            "wallNs": WALL0 + at_ms * 1000000}


def write(d, dump):
    name = "gpubridge-trace-%s-r%d.json" % (dump["comm"]["id"], dump["comm"]["rank"])
    with open(os.path.join(d, name), "w") as f:
        json.dump(dump, f, indent=1)
    return name


def analyze(d):
    p = subprocess.run([info(), "--trace", d], capture_output=True, text=True, timeout=60,
                       env=harness.clean_env())
    harness.scan_sanitizer([info(), "--trace", d], p.stdout + p.stderr)
    return p


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


# ------------------------------------------------------------------ scenarios
ID = "3f2a9c0d11e2b4a7"


def stall_text(r, v):
    return "world: no progress from rank %d within 3 s (collective #5 all_reduce); rank %d may be stopped" % (v, v)


def case_stop(d):
    victim, calls = 2, standard_calls()
    for r in (0, 1, 3):
        # rank 0 saw it first; rank 1 had it relayed; rank 3 saw it itself a moment later
        seen, at = {0: (0, 0), 1: (0, 2), 3: (3, 1)}[r]
        write(d, rank_dump(ID, r, VENDORS, calls, 4, "bridge" if r in (0, 3) else "island",
                           error=error(GB_TIMEOUT, victim, seen, at, stall_text(r, victim))))
    return ("verdict: rank 2 (island amd) stopped responding during collective #5 (all_reduce): it left no "
            "trace and %s timed out waiting for it" % trials.ranks_text([0, 1, 3]))


def case_kill(d):
    victim, calls = 1, standard_calls()
    for r in (0, 2, 3):
        write(d, rank_dump(ID, r, VENDORS, calls, 4, "island",
                           error=error(GB_REMOTE, victim, r if r != 3 else 2, r,
                                       "rank %d closed its connection (island nvidia)" % victim)))
    return ("verdict: rank 1 (island nvidia) died during collective #5 (all_reduce): its connections closed "
            "without a cause and it left no trace")


def skip_calls(victim, r, n=8, at=5):
    calls = standard_calls(n)
    return calls[:at - 1] + calls[at:] if r == victim else calls


def case_skip_check(d):
    victim = 3
    for r in range(4):
        text = ("call check: collective #5 differs: rank 3 called all_reduce(count 1006, float32, sum), "
                "ranks 0-2 called all_reduce(count 1005, float32, sum)")
        write(d, rank_dump(ID, r, VENDORS, skip_calls(victim, r), 4, failed=True,
                           error=error(GB_USAGE, r, r, 10 + r, text)))
    return ("verdict: rank 3 (island amd) skipped collective #5 (all_reduce, count 1005, float32): its calls "
            "from #5 on match the other ranks' calls from #6 on")


def case_skip_nocheck(d):
    victim = 3
    # the island step of #5 moved mismatched sizes: rank 2 times out on rank 3, the
    # others hear of it; rank 3 waits in its #5 (1006) and dumps on the signal
    write(d, rank_dump(ID, 0, VENDORS, skip_calls(victim, 0), 4, "bridge",
                       error=error(GB_TIMEOUT, 2, 2, 3, "bridge: no progress from rank 2 within 3 s")))
    write(d, rank_dump(ID, 1, VENDORS, skip_calls(victim, 1), 4, "island",
                       error=error(GB_REMOTE, 0, 0, 4, "rank 0 closed its connection")))
    write(d, rank_dump(ID, 2, VENDORS, skip_calls(victim, 2), 4, "island",
                       error=error(GB_TIMEOUT, 3, 2, 0, "island amd: no progress from rank 3 within 3 s")))
    write(d, rank_dump(ID, 3, VENDORS, skip_calls(victim, 3), 4, "island", reason="signal"))
    return ("verdict: rank 3 (island amd) skipped collective #5 (all_reduce, count 1005, float32): its calls "
            "from #5 on match the other ranks' calls from #6 on")


def case_skip_last(d):
    victim = 0
    for r in range(4):
        calls = skip_calls(victim, r, 8, 8)
        if r == victim:
            write(d, rank_dump(ID, r, VENDORS, calls, 7, reason="signal"))
        else:
            write(d, rank_dump(ID, r, VENDORS, calls, 7, "check",
                               error=error(GB_TIMEOUT, victim, r, r, "call check: rank 0 sent no description of "
                                           "collective #8 within 3 s")))
    return ("verdict: rank 0 (island nvidia) never called collective #8 (all_reduce): it finished #7 and made no "
            "further call while %s wait inside #8" % trials.ranks_text([1, 2, 3]))


def case_count(d):
    victim = 2
    for r in range(4):
        calls = standard_calls()
        if r == victim:
            calls[4] = call(1005 // 2)
        text = "call check: collective #5 differs: rank 2 called count 502, ranks 0,1,3 count 1005"
        write(d, rank_dump(ID, r, VENDORS, calls, 4, failed=True, error=error(GB_USAGE, r, r, r, text)))
    return ("verdict: rank 2 (island amd) called collective #5 with count 502 where %s used count 1005 "
            "(all_reduce, float32)" % trials.ranks_text([0, 1, 3]))


def case_tie(d):
    for r in range(4):
        calls = standard_calls()
        if r >= 2:
            calls[4] = call(2010)
        write(d, rank_dump(ID, r, VENDORS, calls, 4, failed=True,
                           error=error(GB_USAGE, r, r, r, "call check: collective #5 differs")))
    return ("verdict: %s and %s disagree on collective #5: count 1005 against count 2010 (all_reduce)"
            % (trials.ranks_text([0, 1]), trials.ranks_text([2, 3])))


def case_extra(d):
    victim = 1
    for r in range(4):
        calls = standard_calls()
        if r == victim:
            calls = calls[:4] + [call(77, "broadcast", root=0)] + calls[4:]
        write(d, rank_dump(ID, r, VENDORS, calls, 4, failed=True,
                           error=error(GB_USAGE, r, r, r, "call check: collective #5 differs")))
    return ("verdict: rank 1 (island nvidia) made an extra call at collective #5 (broadcast, count 77, float32) "
            "that the other ranks did not make")


def case_clean(d):
    for r in range(4):
        write(d, rank_dump(ID, r, VENDORS, standard_calls(), 8, reason="signal"))
    return "verdict: no fault found: every rank completed collective #8 and none is inside a collective"


def case_continued(d):
    # rank 3 was stopped, the others timed out naming it, then it was continued and dumped on the signal
    victim, calls = 3, standard_calls()
    for r in range(4):
        err = None if r == victim else error(GB_TIMEOUT, victim, r, r, stall_text(r, victim))
        write(d, rank_dump(ID, r, VENDORS, calls, 4, "island", error=err))
    return ("verdict: rank 3 (island amd) stopped responding during collective #5 (all_reduce): %s timed out "
            "waiting for it" % trials.ranks_text([0, 1, 2]))


def case_p2p(d):
    # after 3 all-reduces rank 0 waits in its first send/recv group for rank 1, which was stopped
    dump = rank_dump(ID, 0, ["nvidia", "amd"], standard_calls(3), 3,
                     error=error(GB_TIMEOUT, 1, 0, 0, "send/recv: no progress from rank 1 within 3 s"))
    rec = record(0, call(4096), "in-flight", "bridge", MONO0 + 900000)
    rec.update({"p2pSeq": 1, "coll": "sendrecv", "op": None, "peer": 1, "npeers": 1, "policy": None})
    dump["records"].append(rec)
    dump["state"]["lastP2p"] = 1
    write(d, dump)
    return ("verdict: rank 1 (island amd) stopped responding during send/recv group #1 of rank 0: it left no "
            "trace and rank 0 timed out waiting for it")


def case_busy(d):
    for r in range(4):
        write(d, rank_dump(ID, r, VENDORS, standard_calls(), 6, "bridge" if r in (0, 2) else "island"))
    return ("verdict: no fault found: every rank is inside collective #7 (all_reduce), none failed and none is "
            "missing (slow, or dumped mid-call)")


def case_own(d):
    # nothing stalled or died: rank 1's stream failed, the others aborted after it
    text = ("device: stream worker failed: out of memory while staging chunk 0 of collective #5\nsecond line "
            + "of the text, long enough that the verdict cuts it " * 4)
    for r in range(4):
        err = error(GB_USAGE if r == 1 else GB_REMOTE, r, r, 5 if r == 1 else 9, text if r == 1 else "aborted")
        write(d, rank_dump(ID, r, VENDORS, standard_calls(), 4, failed=True, error=err))
    assert len(text) > 200
    return "verdict: rank 1 (island nvidia) failed first: gbInvalidUsage: " + text.replace("\n", " ")[:160]


def run_case(suite, name, build):
    d = tempfile.mkdtemp(prefix="gb-trace-analyzer-")
    try:
        want = build(d)
        p = analyze(d)
        got = last_line(p.stdout)
        detail = "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)
        suite.check(p.returncode == 0, "%s: exit 0" % name, detail)
        suite.check(got == want, "%s: verdict" % name, "want: %s\ngot:  %s\n%s" % (want, got, detail))
        return p
    finally:
        if "--keep" in sys.argv:
            print("kept " + d)
        else:
            shutil.rmtree(d, ignore_errors=True)


def case_empty(suite):
    d = tempfile.mkdtemp(prefix="gb-trace-analyzer-")
    try:
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not a dump\n")
        p = analyze(d)
        suite.check(p.returncode == 2, "empty: exit 2", "exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
        suite.check("GPUBRIDGE_TRACE_DIR" in p.stderr and "no flight-recorder dump" in p.stderr,
                    "empty: the message says there is no dump and names GPUBRIDGE_TRACE_DIR", p.stderr)
        suite.check("verdict:" not in p.stdout, "empty: no verdict", p.stdout)
        p = analyze(os.path.join(d, "absent"))
        suite.check(p.returncode == 1 and "cannot read the directory" in p.stderr,
                    "a directory that does not exist: exit 1, said", "exit %d\n%s" % (p.returncode, p.stderr))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_corrupt(suite):
    d = tempfile.mkdtemp(prefix="gb-trace-analyzer-")
    try:
        case_stop(d)
        # rank 3's dump cut off: a key without its ':' on line 3
        bad = "gpubridge-trace-%s-r3.json" % ID
        with open(os.path.join(d, bad), "w") as f:
            f.write('{"schema": "gpubridge-trace/1",\n "library": "0.1.0",\n "reason" "timeout"}\n')
        with open(os.path.join(d, "other.json"), "w") as f:
            f.write("[1, 2,,]")
        p = analyze(d)
        want = ("verdict: rank 2 (island amd) stopped responding during collective #5 (all_reduce): it left no "
                "trace and %s timed out waiting for it" % trials.ranks_text([0, 1]))
        out = p.stdout.splitlines()
        detail = "exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr)
        suite.check(p.returncode == 0 and last_line(p.stdout) == want, "corrupt: the verdict still names rank 2",
                    "want: %s\n%s" % (want, detail))
        suite.check(("rank 3: %s: not a trace (line 3, column 11: expected ':', found '\"')" % bad) in out,
                    "corrupt: the cut dump is reported with its line and column", detail)
        suite.check("rank ?: other.json: not a trace (line 1, column 7: expected a value, found ',')" in out,
                    "corrupt: a .json that is not a dump is reported too", detail)
        suite.check(any(l.startswith("communicator %s:" % ID) and "none from ranks 2,3" in l for l in out),
                    "corrupt: the cut dump's rank counts as without a dump", detail)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    d = tempfile.mkdtemp(prefix="gb-trace-analyzer-")
    try:
        with open(os.path.join(d, "gpubridge-trace-%s-r0.json" % ID), "w") as f:
            f.write("[" * 100 + "]" * 100)
        p = analyze(d)
        detail = "exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr)
        suite.check(p.returncode == 1, "only a bad dump: exit 1", detail)
        suite.check("nested deeper than 64 levels" in p.stdout and "line 1, column 66" in p.stdout,
                    "a document nested too deep is refused at its 66th '['", detail)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_two_comms(suite):
    world, child, quiet = "aaaa000011112222", "bbbb000011112222", "cccc000011112222"

    def build(d):
        # the child is the amd island (world ranks 2,3 as 0,1); its rank 1 (world 3) is killed
        # during the child's #3; the world hears 40 ms later, inside its #6
        write(d, rank_dump(child, 0, ["amd", "amd"], standard_calls(4), 2, "island",
                           error=error(GB_REMOTE, 1, 0, 0, "rank 1 closed its connection")))
        for r in (0, 1, 2):
            write(d, rank_dump(world, r, VENDORS, standard_calls(), 5, "bridge",
                               error=error(GB_REMOTE, 3, 2 if r != 2 else 2, 40 + r, "rank 3 closed its connection")))
        for r in range(2):
            write(d, rank_dump(quiet, r, ["nvidia", "nvidia"], standard_calls(3), 3, reason="signal"))
        return ("verdict: rank 1 (island amd) died during collective #3 (all_reduce): its connections closed "
                "without a cause and it left no trace")

    p = run_case(suite, "two-comms", build)
    out = p.stdout.splitlines()
    firsts = [l.split(":")[0] for l in out if l.startswith("communicator ")]
    suite.check(firsts[:1] == ["communicator " + child], "two-comms: the failed child comes first", p.stdout)
    suite.check(("finding: rank 3 (island amd) died during collective #6 (all_reduce): its connections closed "
                 "without a cause and it left no trace") in out, "two-comms: the world's finding names rank 3",
                p.stdout)
    suite.check(any(l.startswith("communicator %s:" % quiet) and "nothing failed or in flight" in l for l in out),
                "two-comms: the quiet communicator takes one line", p.stdout)


CASES = [("stop", case_stop), ("kill", case_kill), ("skip-check", case_skip_check),
         ("skip-nocheck", case_skip_nocheck), ("skip-last", case_skip_last), ("count", case_count),
         ("tie", case_tie), ("extra", case_extra), ("clean", case_clean), ("continued", case_continued),
         ("p2p", case_p2p), ("busy", case_busy), ("own", case_own)]


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if not os.access(info(), os.X_OK):
        print("FAIL: not built: %s (build first)" % info())
        sys.exit(1)
    suite = harness.Suite("trace analyzer")
    for name, build in CASES:
        if not only or only in name:
            run_case(suite, name, build)
    if not only or only in "empty":
        case_empty(suite)
    if not only or only in "corrupt":
        case_corrupt(suite)
    if not only or only in "two-comms":
        case_two_comms(suite)
    suite.done()


if __name__ == "__main__":
    main()
