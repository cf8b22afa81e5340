#!/usr/bin/env python3
"""The flight recorder's dumps from a real 4-rank job (nvidia:2,amd:2, simulated):

- api: every rank writes gpubridge-trace-<id>-r<rank>.json with gbCommDumpTrace;
  each file is checked key by key against schema gpubridge-trace/1 (every key,
  no other key, every type), and its values against what the rank called.
- timeout: rank 3 leaves out the last call; the others time out and dump
  (reason timeout, the error naming rank 3, the last call in flight in its
  check); rank 3 dumps on GPUBRIDGE_TRACE_SIGNAL=USR1 (reason signal, no error).
- kill: rank 3 is SIGKILLed inside a collective; every survivor dumps
  (reason peer-failure, gbRemoteError naming rank 3).
No temporary file is left in the dump directory.

Every case runs twice, once per way a record ends (GPUBRIDGE_TRACE_DONE):
marker (the stream's end marker, the simulated device's default) and flag
(a stream write of a done flag that the watcher thread polls: the path of
GPUs); deviceDone says which one ended each record."""
import json
import os
import re
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

VENDORS = "nvidia:2,amd:2"
N = 4
CALLS = 6
NAME = re.compile(r"^gpubridge-trace-([0-9a-f]{16})-r(\d+)\.json$")
INT, STR, BOOL = "int", "str", "bool"
PHASES = ("enqueued", "checkBegin", "checkEnd", "staged", "bridgeBegin", "bridgeEnd", "done")
GROUPS = ("world", "bridge", "rail", "island")

TOP = {"schema": STR, "library": STR, "reason": STR, "pid": INT, "host": STR, "wallNs": INT, "monoNs": INT,
       "comm": dict, "error": (None, dict), "ring": dict, "state": dict, "counters": dict, "records": list}
COMM = {"id": STR, "rank": INT, "nranks": INT, "island": INT, "isLeader": BOOL, "runKind": STR, "policy": STR,
        "checkCalls": BOOL, "timeoutSec": INT, "islands": list}
ISLAND = {"index": INT, "vendor": STR, "leader": INT, "ranks": list}
ERROR = {"code": INT, "name": STR, "text": STR, "faultRank": INT, "seenBy": INT, "wallNs": INT}
RING = {"capacity": INT, "recorded": INT, "unrecorded": INT}
STATE = {"lastEnqueued": INT, "lastCompleted": INT, "lastP2p": INT, "inside": (None, INT)}
COUNTERS = {"enqueued": INT, "completed": INT, "failed": INT, "latencyNs": INT, "byColl": dict, "bytes": dict,
            "busyNs": dict}
RECORD = {"seq": INT, "p2pSeq": INT, "coll": STR, "count": INT, "dtype": (None, STR), "op": (None, STR),
          "root": (None, INT), "peer": (None, INT), "npeers": INT, "policy": (None, STR), "nchunks": INT,
          "chunksBridged": INT, "hostStep": BOOL, "check": BOOL, "state": STR, "phase": STR, "result": INT,
          "t": dict, "bytes": dict, "deviceDone": BOOL}


def is_type(v, kind):
    if isinstance(kind, tuple):
        return any(is_type(v, k) for k in kind)
    if kind is None:
        return v is None
    if kind == INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == STR:
        return isinstance(v, str)
    if kind == BOOL:
        return isinstance(v, bool)
    return isinstance(v, kind)


def shape(obj, spec, where, problems):
    """Exactly spec's keys, each of its type."""
    if not isinstance(obj, dict):
        problems.append("%s is %r, not an object" % (where, type(obj).__name__))
        return
    if set(obj) != set(spec):
        problems.append("%s keys: missing %s, extra %s" % (where, sorted(set(spec) - set(obj)),
                                                           sorted(set(obj) - set(spec))))
    for k, kind in spec.items():
        if k in obj and not is_type(obj[k], kind):
            problems.append("%s.%s = %r is not %s" % (where, k, obj[k], kind))


def schema_problems(doc):
    p = []
    shape(doc, TOP, "top", p)
    if p:
        return p
    if doc["schema"] != "gpubridge-trace/1":
        p.append("schema %r" % doc["schema"])
    if doc["reason"] not in ("timeout", "peer-failure", "abort", "signal", "api", "error"):
        p.append("reason %r" % doc["reason"])
    shape(doc["comm"], COMM, "comm", p)
    for i, isl in enumerate(doc["comm"].get("islands", [])):
        shape(isl, ISLAND, "comm.islands[%d]" % i, p)
    if doc["error"] is not None:
        shape(doc["error"], ERROR, "error", p)
    shape(doc["ring"], RING, "ring", p)
    shape(doc["state"], STATE, "state", p)
    shape(doc["counters"], COUNTERS, "counters", p)
    c = doc["counters"]
    shape(c.get("bytes"), dict.fromkeys(GROUPS, INT), "counters.bytes", p)
    shape(c.get("busyNs"), dict.fromkeys(GROUPS[:3], INT), "counters.busyNs", p)
    if not all(is_type(v, INT) for v in c.get("byColl", {}).values()):
        p.append("counters.byColl %r" % c.get("byColl"))
    for i, r in enumerate(doc["records"]):
        shape(r, RECORD, "records[%d]" % i, p)
        if isinstance(r, dict):
            shape(r.get("t"), dict.fromkeys(PHASES, (None, INT)), "records[%d].t" % i, p)
            shape(r.get("bytes"), dict.fromkeys(GROUPS, INT), "records[%d].bytes" % i, p)
    return p


def load_dir(d):
    """{rank: (file name, doc)}, and the names that are not dumps."""
    found, stray = {}, []
    for name in sorted(os.listdir(d)):
        m = NAME.match(name)
        if not m:
            stray.append(name)
            continue
        with open(os.path.join(d, name), encoding="utf-8") as f:
            found[int(m.group(2))] = (name, json.load(f))
    return found, stray


def check_files(s, what, d, ranks):
    found, stray = load_dir(d)
    s.check(not stray, "%s: no other file (temporary) in the dump directory" % what, "found: %s" % stray)
    s.check(sorted(found) == sorted(ranks), "%s: a dump from ranks %s" % (what, list(ranks)),
            "found: %s" % sorted(found))
    for rank, (name, doc) in sorted(found.items()):
        p = schema_problems(doc)
        s.check(not p, "%s: rank %d's dump follows gpubridge-trace/1 key by key" % (what, rank), "\n".join(p))
        if p:
            continue
        c = doc["comm"]
        ok = (NAME.match(name).group(1) == c["id"] and c["rank"] == rank and c["nranks"] == N
              and c["island"] == (0 if rank < 2 else 1) and c["isLeader"] == (rank in (0, 2))
              and c["runKind"] == "simulated"
              and [(i["index"], i["vendor"], i["leader"], i["ranks"]) for i in c["islands"]]
              == [(0, "nvidia", 0, [0, 1]), (1, "amd", 2, [2, 3])])
        s.check(ok, "%s: rank %d's comm section names its place in the job" % (what, rank), json.dumps(c))
    ids = {doc["comm"]["id"] for _, doc in found.values()}
    s.check(len(ids) == 1, "%s: one communicator id in every file" % what, str(ids))
    return {r: doc for r, (_, doc) in found.items()}


def pids(res_lines):
    out = {}
    for r, ls in res_lines.items():
        for line in ls:
            m = re.match(r"^pid (\d+)$", line)
            if m:
                out[r] = int(m.group(1))
    return out


def api_case(s, d, done):
    env = h.clean_env(GPUBRIDGE_TRACE_DIR=d, GPUBRIDGE_CHUNK_BYTES="4K", GPUBRIDGE_POLICY="hierarchical",
                      GPUBRIDGE_TRACE_DONE=done)
    res = h.run_job(N, [h.program("rank_trace_dump"), "--mode", "api", "--calls", str(CALLS)], env,
                    vendors=VENDORS, timeout=120)
    if not s.check(res.rc == 0, "api: the job ran", res.tail()):
        return
    docs = check_files(s, "api", d, range(N))
    pid_of = pids(res.lines())
    colls = ["all_reduce"] * (CALLS - 3) + ["all_reduce", "broadcast", "all_gather"]
    counts = [1000 + i for i in range(1, CALLS - 2)] + [5000, 500, 64]
    for rank, doc in sorted(docs.items()):
        recs = doc["records"]
        got = [(r["seq"], r["coll"], r["count"], r["state"], r["phase"], r["result"]) for r in recs[:CALLS]]
        want = [(i + 1, colls[i], counts[i], "done", "done", 0) for i in range(CALLS)]
        s.check(got == want, "api: rank %d recorded its %d collectives in order, done" % (rank, CALLS),
                "got %s\nwant %s" % (got, want))
        p2p = recs[CALLS] if len(recs) > CALLS else {}
        s.check(len(recs) == CALLS + 1 and p2p.get("seq") == 0 and p2p.get("p2pSeq") == 1 and p2p.get("coll") ==
                "sendrecv" and p2p.get("count") == 128 and p2p.get("peer") == (rank + 1) % N and p2p.get("npeers") == 2
                and p2p.get("policy") is None and p2p.get("state") == "done",
                "api: rank %d recorded its send/recv group" % rank, json.dumps(p2p))
        big = recs[CALLS - 3]
        leader = rank in (0, 2)
        s.check(big["policy"] == "hierarchical" and big["hostStep"] == leader
                and big["nchunks"] == (5 if leader else 0) and big["chunksBridged"] == big["nchunks"]
                and (big["bytes"]["bridge"] == 20000) == leader,
                "api: rank %d's 5000-element all-reduce: %s" % (rank, "5 chunks of 4K over the bridge" if leader
                                                               else "no host step (not a leader)"), json.dumps(big))
        bad = []
        for r in recs:
            t = [r["t"][k] for k in PHASES]
            seen = [v for v in t if v is not None]
            if seen != sorted(seen) or t[0] is None or t[-1] is None:
                bad.append((r["seq"], r["p2pSeq"], t))
            if r["hostStep"] != (r["nchunks"] > 0) or r["hostStep"] != (r["t"]["bridgeEnd"] is not None):
                bad.append(("host step", r["seq"], r["nchunks"], r["t"]))
            if r["check"] != (r["t"]["checkEnd"] is not None):
                bad.append(("check", r["seq"], r["t"]))
        s.check(not bad, "api: rank %d's phase times are in order and match hostStep and check" % rank, str(bad))
        device_done = [r["deviceDone"] for r in recs]
        s.check(device_done == [done == "flag"] * len(recs),
                "api: rank %d's records say deviceDone %s (ended by %s)" % (rank, done == "flag", done),
                str(device_done))
        st, k = doc["state"], doc["counters"]
        s.check(doc["reason"] == "api" and doc["error"] is None and doc["pid"] == pid_of.get(rank)
                and st == {"lastEnqueued": CALLS, "lastCompleted": CALLS, "lastP2p": 1, "inside": None}
                and doc["ring"] == {"capacity": 2048, "recorded": CALLS + 1, "unrecorded": 0},
                "api: rank %d's reason, pid, state and ring" % rank,
                json.dumps([doc["reason"], doc["pid"], pid_of.get(rank), st, doc["ring"]]))
        s.check(k["enqueued"] == CALLS + 1 and k["completed"] == CALLS + 1 and k["failed"] == 0
                and k["byColl"] == {"all_reduce": CALLS - 2, "broadcast": 1, "all_gather": 1, "sendrecv": 1}
                and all(k["bytes"][g] == sum(r["bytes"][g] for r in recs) for g in GROUPS),
                "api: rank %d's counters add up its records" % rank, json.dumps(k))


def timeout_case(s, d, done):
    env = h.clean_env(GPUBRIDGE_TRACE_DIR=d, GPUBRIDGE_TIMEOUT=3, GPUBRIDGE_TRACE_SIGNAL="USR1",
                      GPUBRIDGE_TRACE_DONE=done)
    job = h.LiveJob(h.launch_cmd(N, [h.program("rank_trace_dump"), "--mode", "timeout", "--calls", str(CALLS)],
                                 VENDORS, keep_going=True), env)
    survivors = (0, 1, 2)
    reported = job.wait_for(lambda ls: all(any(x.startswith("error: ") for x in ls.get(r, [])) for r in survivors)
                            and any(x == "victim idle" for x in ls.get(3, [])), 60)
    s.check(reported, "timeout: ranks 0-2 failed and rank 3 idles")
    victim = pids(job.lines()).get(3)
    if reported and victim:
        os.kill(victim, signal.SIGUSR1)
    res = job.finish(60)
    if not s.check(res.rc == 0 and not res.timed_out, "timeout: every rank ended as expected", res.tail()):
        return
    lines = res.lines()
    s.check(any("flight recorder written to" in x and "(reason signal)" in x for x in lines.get(3, [])),
            "timeout: rank 3 wrote its dump on SIGUSR1", "\n".join(lines.get(3, [])[-10:]))
    docs = check_files(s, "timeout", d, range(N))
    # The first rank to time out shuts its connections with the cause; a rank
    # that hears it before its own deadline passes on that cause (rank 3).
    reasons = [docs[r]["reason"] for r in survivors if r in docs]
    s.check("timeout" in reasons, "timeout: at least one rank dumped on its own timeout", str(reasons))
    for rank in survivors:
        doc = docs.get(rank)
        if not doc:
            continue
        e, last = doc["error"] or {}, (doc["records"] or [{}])[-1]
        s.check(doc["reason"] in ("timeout", "peer-failure") and e.get("name") in ("gbTimeout", "gbRemoteError")
                and e.get("faultRank") == 3 and e.get("seenBy") == rank and e.get("wallNs", 0) > 0
                and doc["state"]["lastEnqueued"] == CALLS and doc["state"]["inside"] == CALLS
                and doc["state"]["lastCompleted"] == CALLS - 1
                and (last.get("seq"), last.get("state"), last.get("phase")) == (CALLS, "in-flight", "check"),
                "timeout: rank %d dumped its timeout naming rank 3, inside call #%d's check" % (rank, CALLS),
                json.dumps([doc["reason"], e, doc["state"], last]))
    doc = docs.get(3)
    if doc:
        s.check(doc["reason"] == "signal" and doc["error"] is None
                and doc["state"] == {"lastEnqueued": CALLS - 1, "lastCompleted": CALLS - 1, "lastP2p": 0,
                                     "inside": None},
                "timeout: rank 3's dump (signal) shows it finished #%d and made no further call" % (CALLS - 1),
                json.dumps([doc["reason"], doc["error"], doc["state"]]))


def kill_case(s, d, done):
    env = h.clean_env(GPUBRIDGE_TRACE_DIR=d, GPUBRIDGE_TIMEOUT=20, GPUBRIDGE_TRACE_DONE=done)
    res = h.run_job(N, [h.program("rank_trace_dump"), "--mode", "kill", "--calls", str(CALLS)], env,
                    vendors=VENDORS, keep_going=True, timeout=120)
    lines = res.lines()
    ok = all(any(x.startswith("error: ") for x in lines.get(r, [])) for r in (0, 1, 2))
    s.check(ok and any("raises SIGKILL" in x for x in lines.get(3, [])) and not res.timed_out,
            "kill: rank 3 was killed inside call #%d and ranks 0-2 failed" % CALLS, res.tail())
    docs = check_files(s, "kill", d, (0, 1, 2))
    # A survivor that hears rank 3's failure from another survivor (its shut
    # connection carries the cause) before it sees the closed connection
    # itself reports it as seen by that survivor (an idle connection to rank
    # 3 is noticed only when read).
    for rank, doc in sorted(docs.items()):
        e = doc["error"] or {}
        s.check(doc["reason"] == "peer-failure" and e.get("name") == "gbRemoteError" and e.get("faultRank") == 3
                and e.get("seenBy") in (0, 1, 2) and doc["state"]["inside"] == CALLS,
                "kill: rank %d dumped the failure of rank 3 inside call #%d" % (rank, CALLS),
                json.dumps([doc["reason"], e, doc["state"]]))


class Named:
    """The suite, with each check's name prefixed (the round's mode)."""

    def __init__(self, suite, prefix):
        self.suite, self.prefix = suite, prefix

    def check(self, ok, what, detail=""):
        return self.suite.check(ok, self.prefix + what, detail)


def main():
    h.require_built("rank_trace_dump")
    s = h.Suite("test_trace_dump")
    for done in ("marker", "flag"):
        named = Named(s, "done by %s: " % done)
        for case in (api_case, timeout_case, kill_case):
            d = tempfile.mkdtemp(prefix="gb-trace-dump-")
            try:
                case(named, d, done)
            finally:
                shutil.rmtree(d, ignore_errors=True)
    s.done()


if __name__ == "__main__":
    main()
