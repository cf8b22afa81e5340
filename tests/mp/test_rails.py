"""Split-rail traffic: each rail carries its share of an all-reduce.

With GPUBRIDGE_POLICY=split-rail and GPUBRIDGE_DEBUG=INFO, every rank logs at
gbCommDestroy one line per host group it took part in:
    traffic: <group> sent <N> bytes      (<group>: world, bridge, island, rail <i>)
k = the smallest island's size; rail i links the ranks with island index i
(islands ordered by leader). Each job runs tests/rank_rails (one checked
float32 all-reduce of S bytes) and the driver computes, independently, what
each rail must carry: per chunk of floor(GPUBRIDGE_CHUNK_BYTES / 4) elements,
slice i = [floor(i*len/k), floor((i+1)*len/k)); a rail of two members (two
islands) runs the exchange order, so each member sends its whole slice to
the other once. Every rank's "rail i" counter must equal that sum, ranks
with island index >= k must have no rail, and the rails' shares must be
equal within one element per chunk. Under hierarchical on the same jobs,
only the leaders take part in the bridge, each sending S bytes.

    python3 tests/mp/test_rails.py [--only SUBSTRING] [--list]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ES = 4  # float32
NICE = 2 ** 18       # 1 MiB: whole 64 KiB chunks, each halved exactly
ODD = 100003         # a short last chunk of odd length

# (vendors, policy, element count, GPUBRIDGE_CHUNK_BYTES)
JOBS = [
    ("nvidia:2,amd:2", "split-rail", NICE, 65536),
    ("nvidia:2,amd:2", "split-rail", ODD, 65536),
    ("nvidia:2,amd:2", "split-rail", ODD, 4100),       # 1025-element chunks: every slice pair differs by one
    ("nvidia:3,amd:2", "split-rail", NICE, 65536),
    ("nvidia:3,amd:2", "split-rail", ODD, 65536),
    ("nvidia:3,amd:2", "split-rail", ODD, 4100),
    ("amd:3,nvidia:3", "split-rail", ODD, 4100),       # k = 3
    ("nvidia:2,amd:2", "hierarchical", NICE, 65536),
    ("nvidia:2,amd:2", "hierarchical", ODD, 4100),
    ("nvidia:3,amd:2", "hierarchical", NICE, 65536),
    ("nvidia:3,amd:2", "hierarchical", ODD, 65536),
]

TRAFFIC_RE = re.compile(r"traffic: (.+?) sent (\d+) bytes")
GROUP_NAMES = re.compile(r"^(world|bridge|island(?: [\w@.-]+)?|rail (\d+))$")
JOB_TIMEOUT = 180


def islands_of(vendors):
    """[(vendor, [ranks])] in the order of their leaders (lowest rank)."""
    out = []
    for r, v in enumerate(vendors):
        for name, members in out:
            if name == v:
                members.append(r)
                break
        else:
            out.append((v, [r]))
    return out


def rail_shares(count, chunk_elems, k):
    """Elements rail i carries, summed over chunks; and the number of chunks."""
    shares = [0] * k
    nchunks = 0
    for base in range(0, count, chunk_elems):
        length = min(chunk_elems, count - base)
        nchunks += 1
        for i in range(k):
            shares[i] += (i + 1) * length // k - i * length // k
    return shares, nchunks


def traffic_of(lines):
    """{rank: {group: [bytes, ...]}} from the tagged output."""
    out = {}
    for r, ls in lines.items():
        for l in ls:
            m = TRAFFIC_RE.search(l)
            if m:
                out.setdefault(r, {}).setdefault(m.group(1), []).append(int(m.group(2)))
    return out


def main():
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    if "--list" in sys.argv:
        for i, j in enumerate(JOBS):
            print("job %d: %s policy %s count %d chunk %d" % ((i,) + j))
        return
    harness.require_built("rank_rails")
    suite = harness.Suite("rails")
    for i, (vendors, policy, count, chunk) in enumerate(JOBS):
        label = "job %d: %s policy %s, S = %d bytes (%d float32), chunk %d" % (
            i, vendors, policy, count * ES, count, chunk)
        if only and only not in label:
            continue
        ranks = harness.vendor_list(vendors)
        n = len(ranks)
        isl = islands_of(ranks)
        assert len(isl) == 2, "the expected counts below are for two islands (exchange order on a rail)"
        k = min(len(m) for _, m in isl)
        index_of = {r: idx for _, m in isl for idx, r in enumerate(m)}
        leaders = {m[0] for _, m in isl}
        chunk_elems = chunk // ES
        shares, nchunks = rail_shares(count, chunk_elems, k)
        env = harness.clean_env(GPUBRIDGE_POLICY=policy, GPUBRIDGE_DEBUG="INFO", GPUBRIDGE_CHUNK_BYTES=chunk,
                                GPUBRIDGE_TIMEOUT=60)
        res = harness.run_job(n, [harness.program("rank_rails"), "--count", str(count)], env, vendors=vendors,
                              launcher_timeout=JOB_TIMEOUT - 20, timeout=JOB_TIMEOUT)
        lines = res.lines()
        traffic = traffic_of(lines)
        print("%s: rc %d, %.1f s" % (label, res.rc, res.elapsed), flush=True)
        ran = res.rc == 0 and not res.timed_out and all(
            any(l.startswith("ok:") for l in lines.get(r, [])) for r in range(n))
        suite.check(ran, label + ": every rank's all-reduce checked", res.tail(30))

        # The group names are the documented ones; one line per group.
        bad_names = ["[%d] %s" % (r, g) for r in traffic for g in traffic[r] if not GROUP_NAMES.match(g)]
        dups = ["[%d] %s x%d" % (r, g, len(v)) for r in traffic for g, v in traffic[r].items() if len(v) > 1]
        suite.check(not bad_names and not dups and len(traffic) == n,
                    label + ": every rank logs one 'traffic: <world|bridge|island|rail i> sent N bytes' per group",
                    "ranks with traffic lines: %s; other names: %s; repeated: %s" % (
                        sorted(traffic), bad_names, dups))
        for r in range(n):
            print("  [%d] %s island %d index %d: %s" % (
                r, ranks[r], [j for j, (_, m) in enumerate(isl) if r in m][0], index_of[r],
                ", ".join("%s %s" % (g, "/".join(str(b) for b in v)) for g, v in sorted(traffic.get(r, {}).items()))))

        # Rails this rank is on (islands of two: at most its own index).
        def rails_of(r):
            return {g: v[0] for g, v in traffic.get(r, {}).items() if g.startswith("rail ")}

        if policy == "split-rail":
            expected = [s * ES for s in shares]  # each member sends its slice to the other member once
            print("  k = %d rails, %d chunks of %d elements; expected bytes per rail member: %s" % (
                k, nchunks, chunk_elems, ", ".join("rail %d %d" % (j, b) for j, b in enumerate(expected))))
            values, extra, own = [], [], {}
            for r in range(n):
                rails = rails_of(r)
                idx = index_of[r]
                mine = "rail %d" % idx
                if idx < k:
                    own.setdefault(mine, []).append(rails.get(mine))
                    if rails.get(mine) != expected[idx]:
                        values.append("rank %d (island index %d): %s sent %s bytes, expected %d" % (
                            r, idx, mine, rails.get(mine), expected[idx]))
                for g, b in sorted(rails.items()):
                    if idx >= k or g != mine:
                        extra.append("rank %d (island index %d) logs '%s sent %d bytes'" % (r, idx, g, b))
                        if b != 0:
                            values.append("rank %d (island index %d) sent %d bytes on %s, which it is not on" % (
                                r, idx, b, g))
            print("  measured on each member's own rail: %s" % ", ".join(
                "%s %s" % (g, "/".join(str(b) for b in v)) for g, v in sorted(own.items())))
            suite.check(not values, label + ": each rail member's counter equals its slices' bytes; nothing "
                        "crosses a rail off it", "\n".join(values))
            suite.check(not extra, label + ": a rank logs only the rails it is on (none past island index k-1)",
                        "\n".join(extra))
            # Shares equal within one element per chunk (on what was measured).
            vals = [b for v in own.values() for b in v if b is not None]
            spread = (max(vals) - min(vals)) if vals else None
            suite.check(len(vals) == k * len(isl) and spread <= nchunks * ES,
                        label + ": %d rails carry equal shares within one element per chunk (spread %s bytes, "
                        "bound %d)" % (k, spread, nchunks * ES), "own-rail counters: %s" % own)
        else:
            values, extra = [], []
            for r in range(n):
                groups = traffic.get(r, {})
                if r in leaders:
                    got = groups.get("bridge", [None])[0]
                    if got != count * ES:
                        values.append("leader %d: bridge sent %s bytes, expected S = %d" % (r, got, count * ES))
                elif "bridge" in groups:
                    values.append("rank %d is not a leader but logs bridge traffic (%s)" % (r, groups["bridge"]))
                idx = index_of[r]
                for g, b in sorted(rails_of(r).items()):
                    if idx >= k or g != "rail %d" % idx:
                        extra.append("rank %d (island index %d) logs '%s sent %d bytes'" % (r, idx, g, b))
                    if b != 0:
                        values.append("rank %d sent %d bytes on %s under hierarchical" % (r, b, g))
            suite.check(not values, label + ": each leader sends S over the bridge, no one else; no rail traffic",
                        "\n".join(values))
            suite.check(not extra, label + ": a rank logs only the rails it is on (none past island index k-1)",
                        "\n".join(extra))
    suite.done()


if __name__ == "__main__":
    main()
