#!/usr/bin/env python3
"""Shared staging slots (stage/slots*.c): host groups whose members all
run on one host cross over one shared segment instead of the host transport.

- nvidia:2,amd:2 under flat, hierarchical and split-rail: every collective
  that takes the slots (all-reduce, broadcast, reduce, all-gather,
  reduce-scatter, all-to-all; send/recv over the world's channels, up to
  1 MiB so each 8 KiB channel slot is reused many times a call) gives 0 wrong values for every type and op,
  sizes that are not multiples of the chunk, in and out of place, with small
  chunks (8 KiB, so a call crosses many slots and reuses each); rank 0 logs
  that its world, bridge and rail share slots (the world's segment serves the
  two groups with the same members: no second set-up line for them).
- GPUBRIDGE_BRIDGE_SLOTS=off: the same calls, 0 wrong, and no group shares slots.
- 9 ranks: the world (more than 8 members) keeps the host transport, the
  bridge (2 leaders) shares slots; flat all-reduces, 0 wrong.
- Two simulated hosts (GPUBRIDGE_SIM_HOST; nvidia on one, amd on the
  other): the world, the bridge and the rails take remote slots under every
  policy and collective but send/recv, 0 wrong; all-reduce and broadcast
  match the documented order bit for bit there and on three hosts of one
  rank each (the ring's order).
- A rank that says GPUBRIDGE_BRIDGE_SLOTS=off while the others say auto:
  every rank fails init with a verdict naming the variable.
The reduction order on the slots is checked bit for bit by mp/test_collectives
and mp/test_matrix (their oracle, rank_common.h), which run over them too."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

suite = harness.Suite("shared_slots")
harness.require_built()
perf = os.path.join(harness.BUILD_DIR, "bin", "gpubridge-perf")
SHARE = re.compile(r"INFO NET (world|bridge|rail \d+): (\d+) members on this host share (\d+) staging slots")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)")
COLLS = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


def perf_job(n, vendors, coll, env_extra, ops=("all",), types=("all",), wrap=lambda args: args):
    # sendrecv up to 1 MiB: 128 uses of each 8 KiB channel slot per call
    args = [perf, coll, "-b", "4", "-e", "1M" if coll == "sendrecv" else "100K", "-f", "5", "-n", "2", "-w", "1", "-c", "1", "-d", types[0]]
    if coll in ("all_reduce", "reduce", "reduce_scatter"):
        args += ["-o", ops[0]]
    env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo", GPUBRIDGE_CHUNK_BYTES="8K", GPUBRIDGE_DEBUG="INFO",
                            GPUBRIDGE_DEBUG_SUBSYS="NET", GPUBRIDGE_TIMEOUT="60", **env_extra)
    return harness.run_job(n, wrap(args), env, vendors=vendors, launcher_timeout=240, timeout=260)


def rank0(res):
    return [l.split("] ", 1)[1] for l in res.out.splitlines() + res.err.splitlines() if l.startswith("[0] ")]


def shared_groups(res):
    return sorted(m.group(1) for m in (SHARE.search(l) for l in rank0(res)) if m)


def check_rows(what, res):
    rows = [m for m in (ROW.match(l) for l in rank0(res)) if m]
    wrong = [m.group(0) for m in rows if m.group(6) not in ("0",) or m.group(7) not in ("0", "N/A")]
    suite.check(res.rc == 0 and rows and not wrong, "%s: exits 0, %d rows, 0 wrong" % (what, len(rows)),
                "\n".join(wrong[:5]) or res.tail())


for policy in ("flat", "hierarchical", "split-rail"):
    for coll in COLLS:
        what = "nvidia:2,amd:2 %s %s" % (policy, coll)
        res = perf_job(4, "nvidia:2,amd:2", coll, {"GPUBRIDGE_POLICY": policy})
        check_rows(what, res)
        if coll == "all_reduce":
            # Rank 0: world (4 members); bridge and rail 0 have the same two members: one segment, one line.
            suite.check(shared_groups(res) == ["bridge", "world"],
                        "%s: rank 0's world and bridge share slots (rail 0 uses the bridge's)" % what,
                        "\n".join(l for l in rank0(res) if "INFO" in l)[-2000:])

for coll in COLLS:
    res = perf_job(4, "nvidia:2,amd:2", coll, {"GPUBRIDGE_BRIDGE_SLOTS": "off"})
    check_rows("GPUBRIDGE_BRIDGE_SLOTS=off %s" % coll, res)
    suite.check(shared_groups(res) == [], "GPUBRIDGE_BRIDGE_SLOTS=off %s: no group shares slots" % coll,
                str(shared_groups(res)))

res = perf_job(9, "nvidia:5,amd:4", "all_reduce", {"GPUBRIDGE_POLICY": "flat"}, ops=("sum",), types=("float",))
check_rows("9 ranks flat all_reduce", res)
suite.check(shared_groups(res) == ["bridge"], "9 ranks: the world (9 members) keeps the host transport, the bridge "
            "shares slots", str(shared_groups(res)))

# Several hosts (GPUBRIDGE_SIM_HOST by rank): groups across hosts take remote
# slots (each member's own registered copy; the proxy moves the parts).
SEVERAL = re.compile(r"INFO NET (world|bridge|rail \d+): (\d+) members on several hosts move")


def on_hosts(per_host, args):
    """args under a wrapper that puts ranks [k*per_host, (k+1)*per_host) on host hk."""
    return ["sh", "-c", 'export GPUBRIDGE_SIM_HOST=h$((RANK / %d)); exec "$@"' % per_host, "sh"] + args


def remote_groups(res):
    return sorted(m.group(1) for m in (SEVERAL.search(l) for l in rank0(res)) if m)


# nvidia on host h0, amd on h1: world, bridge and both rails cross hosts.
for policy in ("flat", "hierarchical", "split-rail"):
    for coll in COLLS[:-1]:  # send/recv across hosts keeps the host transport
        what = "two hosts, nvidia:2,amd:2 %s %s" % (policy, coll)
        res = perf_job(4, "nvidia:2,amd:2", coll, {"GPUBRIDGE_POLICY": policy}, wrap=lambda a: on_hosts(2, a))
        check_rows(what, res)
        if coll == "all_reduce":
            suite.check(remote_groups(res) == ["bridge", "world"],
                        "%s: rank 0's world and bridge move remote slots (rail 0 uses the bridge's)" % what,
                        "\n".join(l for l in rank0(res) if "INFO" in l)[-2000:])

# The documented reduction order bit for bit (rank_collectives' oracle):
# two hosts of two ranks, and three hosts of one (the ring's order from 3
# members: a ring threshold of 0), every type and op.
for vendors, per_host, policy, ring in (("nvidia:2,amd:2", 2, "auto", "64K"), ("nvidia:2,amd:2", 2, "flat", "0"),
                                        ("nvidia:1,amd:1,intel:1", 1, "auto", "0")):
    ranks = harness.vendor_list(vendors)
    args = [harness.program("rank_collectives"), "--layout", ",".join(ranks), "--seed", "77", "--avg-int-check",
            "--allreduce", "0,1,7,33000:all:all:oi", "--broadcast", "1,7,33000:all:0,-1:oi"]
    env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_CHUNK_BYTES="64K", GPUBRIDGE_RING_MIN_BYTES=ring,
                            GPUBRIDGE_TIMEOUT="60", GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_DEBUG_SUBSYS="NET")
    res = harness.run_job(len(ranks), on_hosts(per_host, args), env, vendors=vendors, launcher_timeout=200,
                          timeout=220)
    oks = {r: [l for l in ls if l.startswith("ok:")] for r, ls in res.lines().items()}
    what = "hosts of %d, %s policy %s ring-min %s" % (per_host, vendors, policy, ring)
    suite.check(res.rc == 0 and all(oks.get(r) for r in range(len(ranks))),
                "%s: every rank's all-reduces and broadcasts match the documented order bit for bit" % what,
                res.tail())
    suite.check(remote_groups(res), "%s: rank 0 moves remote slots" % what,
                "\n".join(l for l in rank0(res) if "INFO" in l)[-1500:])

# One rank disagrees: a wrapper turns the slots off on rank 1 only.
env = harness.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo", GPUBRIDGE_TIMEOUT="30")
wrap = ["sh", "-c", 'if [ "$RANK" = 1 ]; then export GPUBRIDGE_BRIDGE_SLOTS=off; fi; exec "$@"', "sh", perf,
        "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"]
res = harness.run_job(2, wrap, env, vendors="nvidia:1,amd:1", keep_going=True, launcher_timeout=60, timeout=90)
text = res.out + res.err
for r in (0, 1):
    mine = "\n".join(l for l in text.splitlines() if l.startswith("[%d] " % r))
    suite.check("GPUBRIDGE_BRIDGE_SLOTS" in mine and res.rc != 0,
                "disagreeing GPUBRIDGE_BRIDGE_SLOTS: rank %d fails init naming the variable" % r, mine[-1500:])

suite.done()
