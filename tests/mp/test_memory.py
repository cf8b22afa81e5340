#!/usr/bin/env python3
"""The staging memory a rank holds (gbCommGetMemory), against the layout
written out here from the defaults (simulated ranks on one host: chunk
1 MiB, 4 staging slots so 6 shared slots a member, send/recv channels within
128 MiB of one chunk at most, two exchange buffers of 1 MiB a member; a
control area of at most 256 KiB a member and a header page per segment):

- 2 ranks (world, bridge and rail share one segment): 12 MiB of slots,
  12 MiB of channels, 4 MiB of exchange buffers; no private slots until a
  call takes the private stage, no device memory (host memory is the
  device's); pinned memory of its own under 256 KiB (flags) through a small
  and a large all-reduce.
- 4 ranks in 2 islands: the world's segment (24 MiB of slots, 72 of channels,
  8 of exchange buffers) and one of two members (12 + 4 MiB) per rank.
- GPUBRIDGE_BRIDGE_SLOTS=off: no segment; the private slots (4 x 1 MiB)
  come with the first all-reduce, not with init.

It fails when a layout grows past these, or when memory is held before the
path that needs it runs. gbGetMemoryEstimate (what gpubridge-info prints)
gives each job's segment bytes exactly and its private slots' 4 MiB."""
import re

import harness

MIB = 1 << 20
KIB = 1 << 10
LINE = re.compile(r"^(?:memory (\w+)|estimate) pinned (\d+) segment (\d+) device (\d+)$")


def run(suite, name, n, vendors, **env):
    res = harness.run_job(n, [harness.program("rank_memory")], harness.clean_env(**env), vendors=vendors, timeout=120)
    seen = {}
    for rank, lines in res.lines().items():
        for l in lines:
            m = LINE.match(l)
            if m:
                seen[(rank, m.group(1) or "estimate")] = tuple(int(x) for x in m.groups()[1:])
    ok = res.rc == 0 and len(seen) == 4 * n
    suite.check(ok, "%s: every rank reports its memory at init, after 64 KiB and after 8 MiB" % name, res.tail())
    if not ok:
        return None
    for rank in range(n):
        est, got = seen.pop((rank, "estimate")), seen[(rank, "init")]
        want_segment = got[1]
        suite.check(est == (4 * MIB, want_segment, 0), "%s, rank %d: the estimate (private slots %d, segments %d, "
                    "device %d) is the job's (4 MiB, %d, 0)" % (name, rank, est[0], est[1], est[2], want_segment),
                    str(est))
    return seen


def within(value, low, high):
    return low <= value <= high


def main():
    suite = harness.Suite("test_memory")
    harness.require_built("rank_memory")

    seen = run(suite, "2 ranks", 2, "nvidia:1,amd:1")
    if seen:
        payload = 12 * MIB + 12 * MIB + 4 * MIB
        for (rank, phase), (pinned, segment, device) in sorted(seen.items()):
            suite.check(within(segment, payload, payload + 4 * KIB + 2 * 256 * KIB) and pinned < 256 * KIB and
                        device == 0,
                        "2 ranks, rank %d %s: segment %d in [%d, +516 KiB], pinned %d < 256 KiB, device 0" % (
                            rank, phase, segment, payload, pinned), str(seen))

    seen = run(suite, "4 ranks in 2 islands", 4, "nvidia:2,amd:2")
    if seen:
        payload = (24 + 72 + 8) * MIB + (12 + 4) * MIB
        for (rank, phase), (pinned, segment, device) in sorted(seen.items()):
            suite.check(within(segment, payload, payload + 2 * 4 * KIB + 6 * 256 * KIB) and pinned < 256 * KIB and
                        device == 0,
                        "4 ranks, rank %d %s: segment %d in [%d, +1544 KiB], pinned %d < 256 KiB, device 0" % (
                            rank, phase, segment, payload, pinned), str(seen))

    seen = run(suite, "shared slots off", 2, "nvidia:1,amd:1", GPUBRIDGE_BRIDGE_SLOTS="off")
    if seen:
        for rank in range(2):
            pinned0 = seen[(rank, "init")][0]
            suite.check(pinned0 < 256 * KIB and seen[(rank, "init")][1] == 0,
                        "slots off, rank %d: no segment, no private slots at init (pinned %d)" % (rank, pinned0),
                        str(seen))
            for phase in ("small", "large"):
                pinned, segment, device = seen[(rank, phase)]
                suite.check(within(pinned, 4 * MIB, 4 * MIB + 256 * KIB) and segment == 0 and device == 0,
                            "slots off, rank %d after the %s all-reduce: the private slots, 4 MiB (pinned %d)" % (
                                rank, phase, pinned), str(seen))
    suite.done()


if __name__ == "__main__":
    main()
