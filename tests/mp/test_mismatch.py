"""Call-mismatch detection: when ranks make different calls for the same
sequence number, every rank gets an error, not a wrong result and not a hang.

One job per case (different collective, count, datatype, op, broadcast root,
reduce root, all-gather vs all-reduce, barrier vs the all-reduce of one int32
it runs as, named "barrier", send count vs receive count, a send the peer
does not receive), on a two-island job (nvidia:2,amd:2) and a one-island
job (nvidia:3), under policies hierarchical and flat. Each job runs
tests/rank_mismatch: a few matching calls (results checked), then the
mismatching one. Every rank must see the call return gbSuccess,
gbStreamSynchronize fail and gbCommGetAsyncError say gbInvalidUsage within
GPUBRIDGE_TIMEOUT (10 s); the driver requires gbGetLastError(comm) to be
byte-identical on every rank and to say, in the documented shape,
  collective #N mismatch: <field> differs: ranks A,B call <d1>; rank C calls
  <d2>; every rank must make the same calls in the same order
  send/recv mismatch: rank A sends N <type> to rank B, rank B receives ...
which field differs and which ranks are on each side.

Send/recv is not collective: only the two ranks of a pair compare their
lists, so for "send count vs receive count" the two ranks of the pair must
fail with byte-identical gbInvalidUsage text, and every other rank must fail
too (the communicator fails and closes its connections), with any error. A
send the peer never receives can only be noticed by a deadline: every rank
must fail within GPUBRIDGE_TIMEOUT + 3 s, and where the peer does talk to the
sender in the same group, the text names the unmatched send.

Queued and count-0 calls (GPUBRIDGE_CHECK_CALLS=on), each job repeated
since the bad outcome was intermittent: "count0" (one rank calls all-reduce
with count 0, then 1024, the others 1024 twice) and "count0-allgather" (the
same with all-gather) must fail on every rank with the same text naming the
count (0 against 1024), within the deadline; "queued" (two all-reduces queued
back to back, the second with 1023 on one rank), on two-island layouts of 3
and 4 ranks, must give every rank the same gbInvalidUsage text for the
second call, from gbCommGetAsyncError and from gbGetLastError(comm) read
right after gbStreamSynchronize (the first failure, not a side effect such
as a connection shut down). "count0-off" (GPUBRIDGE_CHECK_CALLS=off): one
rank's count-0 all-reduce is a no-op, as in NCCL, and the next all-reduce
sums right on every rank.

    python3 tests/mp/test_mismatch.py [--only SUBSTRING] [--list]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TIMEOUT_S = 10        # GPUBRIDGE_TIMEOUT: every rank must report within it
WARMUPS = 3           # matching calls before the mismatch
COUNT = 100           # elements of the mismatching call (the odd rank: 99 or 50)
LAYOUTS = ["nvidia:2,amd:2", "nvidia:3"]
POLICIES = ["hierarchical", "flat"]

# kind -> (field, odd rank's description, the others' description, odd rank in a job of 4)
COLLECTIVE_CASES = {
    "coll": ("collective", r"broadcast", r"all.?reduce", 2),
    "count": ("count", r"\b%d\b" % (COUNT - 1), r"\b%d\b" % COUNT, 1),
    "dtype": ("datatype", r"float", r"int", 3),
    "op": ("op", r"\bmax\b", r"\bsum\b", 0),
    "bcast-root": ("root", r"broadcast.*root\D{0,3}1\b", r"broadcast.*root\D{0,3}0\b", 2),
    "reduce-root": ("root", r"reduce.*root\D{0,3}1\b", r"reduce.*root\D{0,3}0\b", 3),
    "allgather": ("collective", r"all.?gather", r"all.?reduce", 1),
    "barrier": ("collective", r"^barrier$", r"all.?reduce\(count 1, int32, sum\)", 2),
}
P2P_CASES = {"sendrecv-count": 1, "send-unmatched": 0}

# Two calls queued without a synchronize between them:
# kind -> (field, odd rank's description, the others', odd rank, which call (1 or 2) mismatches)
QUEUED_COUNT = 1024
QUEUED_CASES = {
    "count0": ("count", r"all.?reduce\(count 0\b", r"all.?reduce\(count %d\b" % QUEUED_COUNT, 1, 1),
    "count0-allgather": ("count", r"all.?gather\(count 0\b", r"all.?gather\(count %d\b" % QUEUED_COUNT, 2, 1),
    "queued": ("count", r"\b%d\b" % (QUEUED_COUNT - 1), r"\b%d\b" % QUEUED_COUNT, 1, 2),
}
QUEUED_LAYOUTS = {"count0": LAYOUTS, "count0-allgather": LAYOUTS,
                  "queued": ["nvidia:2,amd:2", "nvidia:2,amd:1", "amd:1,nvidia:2"]}
REPEATS = 10

COLL_RE = re.compile(r"collective #(\d+) mismatch: (\w+) differs: ranks? ([\d,]+) calls? (.*?); "
                     r"ranks? ([\d,]+) calls? (.*?); every rank must make the same calls in the same order")
SR_COUNT_RE = re.compile(r"send/recv mismatch: rank (\d+) sends (\d+) (\w+) to rank (\d+), "
                         r"rank (\d+) receives (\d+) (\w+) from rank (\d+)")
SR_SEND_RE = re.compile(r"send/recv mismatch: rank (\d+) sends (\d+) (\w+) to rank (\d+)")
REPORT_RE = re.compile(r"^report: call (-?\d+) sync (-?\d+) async (-?\d+) after ([\d.]+) s$")

JOB_TIMEOUT = 90


def jobs():
    """(layout, ranks, policy, case, odd rank, repetition)"""
    for layout in LAYOUTS:
        n = len(harness.vendor_list(layout))
        for policy in POLICIES:
            for kind, spec in COLLECTIVE_CASES.items():
                yield layout, n, policy, kind, spec[3] % n, 0
            for kind, odd in P2P_CASES.items():
                yield layout, n, policy, kind, odd % n, 0
            yield layout, n, policy, "count0-off", 1, 0
    for kind, spec in QUEUED_CASES.items():
        for layout in QUEUED_LAYOUTS[kind]:
            n = len(harness.vendor_list(layout))
            for policy in POLICIES:
                for rep in range(REPEATS):
                    yield layout, n, policy, kind, spec[3] % n, rep


def case_env(policy, kind):
    env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_TIMEOUT=TIMEOUT_S)
    if kind in QUEUED_CASES:
        env["GPUBRIDGE_CHECK_CALLS"] = "on"
    elif kind == "count0-off":
        env["GPUBRIDGE_CHECK_CALLS"] = "off"
    return env


def ranks_of(text):
    return {int(x) for x in text.split(",") if x}


def check_text(kind, text, n, odd):
    """Problems with the text of one case (an empty list when it is right)."""
    problems = []
    if "mismatch" not in text:
        problems.append("no 'mismatch' in the text")
    if kind in COLLECTIVE_CASES or kind in QUEUED_CASES:
        if kind in QUEUED_CASES:
            field, odd_pat, other_pat, _, which = QUEUED_CASES[kind]
        else:
            (field, odd_pat, other_pat, _), which = COLLECTIVE_CASES[kind], 1
        m = COLL_RE.search(text)
        if not m:
            return problems + ["the text does not have the shape 'collective #N mismatch: <field> differs: "
                               "ranks .. call ..; rank .. calls ..; every rank must make the same calls in "
                               "the same order'"]
        seq, got_field = int(m.group(1)), m.group(2)
        sides = [(ranks_of(m.group(3)), m.group(4)), (ranks_of(m.group(5)), m.group(6))]
        if seq not in (WARMUPS + which - 1, WARMUPS + which):
            problems.append("collective #%d: the mismatch is call %d (0-based) or %d (1-based)" % (
                seq, WARMUPS + which - 1, WARMUPS + which))
        if got_field != field:
            problems.append("names field '%s', expected '%s'" % (got_field, field))
        odd_side = [s for s in sides if s[0] == {odd}]
        other_side = [s for s in sides if s[0] == set(range(n)) - {odd}]
        if len(odd_side) != 1 or len(other_side) != 1:
            problems.append("rank sets %s and %s, expected {%d} and %s" % (
                sorted(sides[0][0]), sorted(sides[1][0]), odd, sorted(set(range(n)) - {odd})))
        else:
            if not re.search(odd_pat, odd_side[0][1], re.I):
                problems.append("rank %d's call '%s' does not match /%s/" % (odd, odd_side[0][1], odd_pat))
            if not re.search(other_pat, other_side[0][1], re.I):
                problems.append("the others' call '%s' does not match /%s/" % (other_side[0][1], other_pat))
            if kind == "reduce-root" and any(re.search(r"broadcast", s[1], re.I) for s in sides):
                problems.append("a reduce described as a broadcast")
    elif kind == "sendrecv-count":
        prev = (odd + n - 1) % n
        m = SR_COUNT_RE.search(text)
        want = (prev, COUNT, odd, odd, COUNT // 2, prev)
        if not m:
            problems.append("the text does not have the shape 'send/recv mismatch: rank %d sends %d float32 to "
                            "rank %d, rank %d receives %d float32 from rank %d'" % want)
        else:
            got = (int(m.group(1)), int(m.group(2)), int(m.group(4)), int(m.group(5)), int(m.group(6)),
                   int(m.group(8)))
            if got != want:
                problems.append("(sender, count, receiver, receiver, count, sender) = %s, expected %s" % (got, want))
            if not (m.group(3).startswith("float") and m.group(7).startswith("float")):
                problems.append("datatypes '%s', '%s', expected float32" % (m.group(3), m.group(7)))
    elif kind == "send-unmatched":
        peer = (odd + 2) % n
        m = SR_SEND_RE.search(text)
        if not m:
            problems.append("the text does not have the shape 'send/recv mismatch: rank %d sends %d float32 to "
                            "rank %d, ...'" % (odd, COUNT, peer))
        else:
            got = (int(m.group(1)), int(m.group(2)), int(m.group(4)))
            if got != (odd, COUNT, peer):
                problems.append("(sender, count, receiver) = %s, expected %s" % (got, (odd, COUNT, peer)))
    return problems


def label_of(i, layout, policy, kind, odd, rep):
    return "job %d: %s policy %s case %s odd rank %d%s" % (i, layout, policy, kind, odd,
                                                           " run %d" % (rep + 1) if kind in QUEUED_CASES else "")


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    all_jobs = list(jobs())
    if "--list" in sys.argv:
        for i, (layout, n, policy, kind, odd, rep) in enumerate(all_jobs):
            print(label_of(i, layout, policy, kind, odd, rep))
        return
    harness.require_built("rank_mismatch")
    suite = harness.Suite("mismatch")
    for i, (layout, n, policy, kind, odd, rep) in enumerate(all_jobs):
        label = label_of(i, layout, policy, kind, odd, rep)
        if only and only not in label:
            continue
        env = case_env(policy, kind)
        count = QUEUED_COUNT if kind in QUEUED_CASES or kind == "count0-off" else COUNT
        cmd = [harness.program("rank_mismatch"), "--case", kind, "--odd", str(odd), "--warmup", str(WARMUPS),
               "--count", str(count)]
        res = harness.run_job(n, cmd, env, vendors=layout, keep_going=True, launcher_timeout=JOB_TIMEOUT - 30,
                              timeout=JOB_TIMEOUT)
        lines = res.lines()
        if kind == "count0-off":
            bad = [r for r in range(n) if not any(l.startswith("ok:") for l in lines.get(r, []))]
            print("%s: rc %d, %.1f s" % (label, res.rc, res.elapsed), flush=True)
            suite.check(not bad and res.rc == 0 and not res.timed_out, label,
                        "ranks %s printed no ok line; rc %s\n%s" % (bad, res.rc, res.tail(30)))
            continue
        problems = []
        texts, afters = {}, {}
        for r in range(n):
            ls = lines.get(r, [])
            rep = [REPORT_RE.match(l) for l in ls if l.startswith("report:")]
            txt = [l[len("text: "):] for l in ls if l.startswith("text: ")]
            stxt = [l[len("sync-text: "):] for l in ls if l.startswith("sync-text: ")]
            if kind not in P2P_CASES and txt and stxt and stxt[0] != txt[0]:
                problems.append("rank %d: gbGetLastError(comm) right after gbStreamSynchronize says '%s', not the "
                                "communicator's first failure '%s'" % (r, stxt[0], txt[0]))
            if not rep or not rep[0] or not txt:
                problems.append("rank %d printed no report (no error, a hang, or a crash)" % r)
                continue
            after = float(rep[0].group(4))
            afters[r] = after
            texts[r] = txt[0]
            if after > TIMEOUT_S:
                problems.append("rank %d reported after %.3f s, more than GPUBRIDGE_TIMEOUT=%d" % (r, after, TIMEOUT_S))
            if not any(l.startswith("ok:") for l in ls):
                problems.append("rank %d: %s" % (r, "; ".join(l for l in ls if "FAIL" in l) or "no ok line"))
        if kind in P2P_CASES:
            # The pair that disagrees shares the text; the rest only fail.
            prev = (odd + n - 1) % n
            pair = {prev, odd} if kind == "sendrecv-count" else {odd}
            limit = TIMEOUT_S + 3 if kind == "send-unmatched" else TIMEOUT_S
            problems = [p for p in problems if "more than GPUBRIDGE_TIMEOUT" not in p]
            problems += ["rank %d reported after %.3f s, more than %d s" % (r, a, limit)
                         for r, a in sorted(afters.items()) if a > limit]
            pair_texts = {texts[r] for r in pair if r in texts}
            if kind == "send-unmatched" and not any(SR_SEND_RE.search(t) for t in pair_texts):
                pair_texts = set()  # a deadline ended it: any error text will do
            texts = {r: t for r, t in texts.items() if r in pair} if pair_texts else {}
        distinct = sorted(set(texts.values()))
        if len(distinct) > 1:
            problems.append("the texts differ across ranks:\n" + "\n".join(
                "  [%d] %s" % (r, texts[r]) for r in sorted(texts)))
        if distinct:
            problems += check_text(kind, distinct[0], n, odd)
        if res.timed_out or res.rc != 0:
            problems.append("job rc %s%s" % (res.rc, " (driver timeout)" if res.timed_out else ""))
        print("%s: rc %d, %.1f s, errors after %s s" % (
            label, res.rc, res.elapsed, ",".join("%.2f" % afters[r] for r in sorted(afters))), flush=True)
        if distinct:
            print("  text: %s" % distinct[0])
        suite.check(not problems, label, "\n".join(problems) + "\n" + res.tail(30))
    suite.done()


if __name__ == "__main__":
    main()
