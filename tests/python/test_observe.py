"""The flight recorder from Python on 2 simulated ranks (nvidia + amd, each the
leader of its island, policy hierarchical), on a communicator of its own so
that its collectives are numbered from 1:

- observe(): exactly N records for N all-reduces, seq 1..N in order, phase and
  state done, count and bridge bytes as called (an all-reduce of n float32
  between two leaders sends n * 4 bytes over the bridge: one exchange of the
  whole vector, or a reduce-scatter and an all-gather of half each), stamps in
  phase order, durations adding up to the total; fn runs on the observer's
  dispatcher thread, not on a gpubridge thread;
- in_flight(): while the peer withholds its call, the waiting rank's
  collective is in flight (seq N+1, a phase before done), in in_flight(comm)
  and in in_flight(); once the peer called and the work finished, nothing is;
- counters(): enqueued and completed N+1, all of them all-reduces, the bridge
  bytes the sum of the records';
- memory(): the shared segment gbGetMemoryEstimate gives for 2 ranks, no
  device memory (simulated), and only flags of its own (under 256 KiB);
- dump_trace(): a gpubridge-trace/1 file of this rank with its records;
- remove(): a removed observer gets nothing more while a second one gets the
  later records; destroy() removes what is left.
Every wait has a deadline."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbCommSetObserver", "gbCommGetInFlight", "gbCommGetRecords", "gbCollRecordPhase",
         "gbCommGetCounters", "gbCommDumpTrace", "gbCommGetMemory")
N = 12
COUNT = 1000
DEADLINE = 30.0


class Seen:
    """What an observer function received, with a condition to wait on."""

    def __init__(self, threading):
        self.records = []
        self.threads = set()
        self.cond = threading.Condition()
        self._threading = threading

    def __call__(self, record):
        with self.cond:
            self.records.append(record)
            self.threads.add(self._threading.current_thread().name)
            self.cond.notify_all()

    def wait_for(self, n):
        with self.cond:
            self.cond.wait_for(lambda: len(self.records) >= n, DEADLINE)
            return len(self.records)


def wait_until(cond, what):
    import time
    end = time.monotonic() + DEADLINE
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("no %s within %.0f s" % (what, DEADLINE))
        time.sleep(0.005)  # polling interval of a deadline-bounded wait


def worker():
    import datetime
    import json
    import tempfile
    import threading

    import torch
    import torch.distributed as dist

    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        store.set("observe_uid", gpubridge.get_unique_id())
    store.wait(["observe_uid"])
    comm = gpubridge.Communicator.from_unique_id(world, store.get("observe_uid"), rank, 60)
    peer_values = [torch.arange(COUNT, dtype=torch.float32) * (r + 1) for r in range(world)]
    total = sum(peer_values)

    seen = Seen(threading)
    h = gpubridge.observe(comm, seen)
    for i in range(N):
        t = peer_values[rank].clone()
        gpubridge.all_reduce(t, comm=comm)
        check(torch.equal(t, total), "all_reduce %d: wrong sum" % i)
    got = seen.wait_for(N)
    recs = list(seen.records)
    check(got == N, "observer: %d records of %d all-reduces" % (got, N))
    check([r["seq"] for r in recs] == list(range(1, N + 1)), "observer seqs %s" % [r["seq"] for r in recs])
    for r in recs:
        check((r["phase"], r["state"], r["result"], r["coll"], r["count"], r["dtype"], r["op"], r["p2p_seq"]) ==
              ("done", "done", 0, "all_reduce", COUNT, "float32", "sum", 0), "record %s" % r)
        check(r["host_step"] and r["policy"] == "hierarchical" and r["bytes"]["bridge"] == COUNT * 4 and
              r["bytes"]["world"] == 0, "record %d: host step %s, policy %s, bytes %s, want %d over the bridge"
              % (r["seq"], r["host_step"], r["policy"], r["bytes"], COUNT * 4))
        t = r["t_ns"]
        order = [t[k] for k in ("enqueued", "staged", "bridge_begin", "bridge_end", "done")]
        check(all(order) and order == sorted(order), "record %d: stamps out of phase order: %s" % (r["seq"], t))
        d = r["durations_s"]
        parts = d["check"] + d["island_before"] + d["wait_proxy"] + d["bridge"] + d["after"]
        # One host's streams hand chunks over themselves and the proxy only
        # watches: it may see the bridge after the stream was done (then 0).
        check(d["bridge"] >= 0 and abs(parts - d["total"]) < 1e-9 and
              abs(d["total"] - (t["done"] - t["enqueued"]) * 1e-9) < 1e-9, "record %d: durations %s" % (r["seq"], d))
    check(seen.threads == {"gpubridge-observe-%d" % rank}, "observer ran on threads %s" % seen.threads)

    # A collective the peer withholds is in flight until the peer calls it.
    check(gpubridge.in_flight(comm) == [] and comm not in gpubridge.in_flight(), "in flight before the call")
    if rank == 0:
        t = peer_values[rank].clone()
        work = gpubridge.all_reduce(t, comm=comm, async_op=True)
        inside = wait_until(lambda: gpubridge.in_flight(comm), "record in flight")
        check(len(inside) == 1 and inside[0]["seq"] == N + 1 and inside[0]["state"] == "in-flight" and
              inside[0]["phase"] in ("check", "island", "staged", "bridge") and not inside[0]["t_ns"]["done"],
              "in flight while the peer withholds its call: %s" % inside)
        every = gpubridge.in_flight()
        check([r["seq"] for r in every.get(comm, [])] == [N + 1], "in_flight() of every communicator: %s" % every)
        check(not work.is_completed(), "the work finished while the peer had not called")
        store.set("observe_go", "1")
        work.wait()
    else:
        store.wait(["observe_go"])
        t = peer_values[rank].clone()
        gpubridge.all_reduce(t, comm=comm)
    check(torch.equal(t, total), "withheld all_reduce: wrong sum")
    wait_until(lambda: gpubridge.in_flight(comm) == [], "empty in_flight after the work finished")
    check(comm not in gpubridge.in_flight(), "in_flight() still lists the communicator")
    check(seen.wait_for(N + 1) == N + 1 and seen.records[N]["seq"] == N + 1, "the withheld call's record")

    k = gpubridge.counters(comm)
    check((k["enqueued"], k["completed"], k["failed"], k["unrecorded"]) == (N + 1, N + 1, 0, 0), "counters %s" % k)
    check(k["by_coll"]["all_reduce"] == N + 1 and sum(k["by_coll"].values()) == N + 1, "by_coll %s" % k["by_coll"])
    check(k["bytes"]["bridge"] == sum(r["bytes"]["bridge"] for r in seen.records) == (N + 1) * COUNT * 4,
          "bridge bytes %s" % k["bytes"])

    mem, est = gpubridge.memory(comm), gpubridge._lib.get_memory_estimate(2, False)
    check(mem["segments"] == est.segment_bytes > 0 and mem["device"] == 0 and mem["pinned"] < 256 << 10,
          "memory %s, estimate for 2 ranks %d" % (mem, est.segment_bytes))

    with tempfile.TemporaryDirectory(prefix="gbobserve-") as tmp:
        path = gpubridge.dump_trace(comm, tmp)
        check(os.path.dirname(path) == tmp and os.path.basename(path).startswith("gpubridge-trace-") and
              path.endswith("-r%d.json" % rank), "dump path %s" % path)
        with open(path) as f:
            dump = json.load(f)
        check(dump["schema"] == "gpubridge-trace/1" and dump["comm"]["rank"] == rank and
              dump["comm"]["nranks"] == world, "dump header %s" % {k: dump.get(k) for k in ("schema", "comm")})
        seqs = [r["seq"] for r in dump["records"]]
        check(seqs == list(range(1, N + 2)), "dump records' seqs %s" % seqs)
        check(sorted(os.listdir(tmp)) == [os.path.basename(path)], "dump dir holds %s" % os.listdir(tmp))

    # remove(): the removed observer hears nothing more; a second one hears the rest.
    later = Seen(threading)
    h2 = gpubridge.observe(comm, later)
    h.remove()
    for _ in range(3):
        t = peer_values[rank].clone()
        gpubridge.all_reduce(t, comm=comm)
    check(later.wait_for(3) == 3 and [r["seq"] for r in later.records] == [N + 2, N + 3, N + 4],
          "second observer: %s" % [r["seq"] for r in later.records])
    h2.remove()
    check(len(seen.records) == N + 1, "the removed observer got %d records, want %d" % (len(seen.records), N + 1))
    h3 = gpubridge.observe(comm, Seen(threading))
    comm.destroy()  # removes h3 first
    check(h3._removed and not h3._thread.is_alive(), "destroy left an observer running")
    dist.destroy_process_group()
    print("rank %d ok" % rank)


def main():
    gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    out, _ = gbtest.run_ranks(os.path.abspath(__file__), vendors=("nvidia", "amd"), timeout=120,
                              extra_env={"GPUBRIDGE_POLICY": "hierarchical"})
    gbtest.cleanup(out)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        worker()
    else:
        main()
