#!/usr/bin/env python3
"""The cluster kit's results files (OUT/results.json, one per kit run) as
the markdown of docs/HARDWARE_VALIDATION.md: per run a section with its
metadata (gpubridge's version and build, vendor libraries, the GPUBRIDGE_*
variables rank 0 read, nodes, ranks and islands, the preflight's verdicts,
the link), then tables: the ladder (every rung and size, against the vendor
library alone where --baseline ran; then each rung not run here, or run
without --baseline or with fewer ranks, and why), the bridge time predicted
against measured, and the training check. Prints to stdout.

Predicted bridge time: bench/scale_model.py's leader time (docs/SCALE.md:
what gpubridge runs among L leaders for S bytes, one exchange or a ring of
2(L-1) steps), each of k rails under split-rail (the smallest island's
ranks; else 1) carrying S / k, alpha_hop and B_link as the kit's link step
measured them (one TCP stream between the
nodes: the bytes over the measured link bandwidth, not a model of
gpubridge's own stages). Measured: rank 0's bridge phase (gpubridge-perf
--phases, out of place) in the mixed rung. Where every rank ran on one host
(the local launcher on one machine) no byte crosses a link: the table says so
and predicts nothing.

    scripts/cluster/tables.py OUT/results.json [MORE/results.json ...]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
import scale_model  # noqa: E402


def fmt(x, digits=1):
    return "-" if x is None else ("%.*f" % (digits, x))


def size(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return "%d %s" % (b // k, unit)
    return "%d B" % b


def islands_of(rung):
    ranks = rung.get("ranks") or []
    out = {}
    for r in ranks:
        out.setdefault(r.get("island"), []).append(r)
    return ["island %s: %s, ranks %s, %s" % (k, v[0].get("vendor"), ",".join(str(r["rank"]) for r in v),
                                            "/".join(sorted(set(r.get("host", "?") for r in v))))
            for k, v in sorted(out.items(), key=lambda kv: str(kv[0]))]


def predicted_us(s, L, k, link):
    a, bw = link.get("alpha_hop_us"), link.get("bandwidth_gbps")
    if not a or not bw or L < 2:
        return None
    return scale_model.leader_time(L, s / k, a * 1e-6, bw * 1e9) * 1e6


def not_run(ladder):
    """A line per rung the ladder did not run here, ran without the vendor library alone, or ran with
    fewer ranks, saying why (the local launcher on fewer GPUs or without AMD ones)."""
    out = ["- rung %s: not run here: %s" % (x["name"], x["why"]) for x in ladder.get("skipped", [])]
    seen = set()
    for r in ladder.get("rungs", []):
        for key, what in (("baseline_off", "no vendor library alone"), ("note", "fewer ranks")):
            if r.get(key) and (r["name"], key) not in seen:
                seen.add((r["name"], key))
                out.append("- rung %s: %s: %s" % (r["name"], what, r[key]))
    return out


def section(res, path):
    out = []
    gb = res.get("gpubridge", {})
    build = gb.get("build", {})
    rungs = res.get("steps", {}).get("ladder", {}).get("rungs", [])
    mixed = [r for r in rungs if r["name"].startswith("mixed")]
    top = mixed[0] if mixed else (rungs[-1] if rungs else {})
    nodes = res.get("nodes") or {}
    out.append("## %s: cluster kit, %s (gpubridge %s%s)" % (
        res.get("started", "?"), ", ".join("%s %s" % kv for kv in sorted(nodes.items())) or res.get("login_host"),
        gb.get("version", "?"), ", simulated" if res.get("simulated") else ""))
    out.append("")
    out.append("- results file: `%s`; launcher %s" % (path, res.get("launcher")))
    out.append("- gpubridge: %s; compiler %s; tools in `%s`" % (build.get("library", gb.get("version")),
                                                               build.get("compiler", "?"), gb.get("bin")))
    if res.get("emulated_amd"):
        out.append("- AMD ranks: emulated, on this machine's %s NVIDIA GPU(s) (rig `%s`: HIP, HIPRTC and RCCL "
                   "served by CUDA, NVRTC and NCCL)" % (res.get("gpus") or "?", res["emulated_amd"]))
    libs = sorted(set(l for r in rungs for l in r.get("vendor_libraries", [])))
    out.append("- vendor libraries: %s" % (", ".join(libs) or "none (simulated ranks)"))
    env = top.get("env_rank0") or res.get("environment") or {}
    out.append("- GPUBRIDGE_* read by rank 0: %s" % (" ".join("%s=%s" % kv for kv in sorted(env.items())) or "none"))
    t = top.get("topology") or {}
    out.append("- topology: %s ranks, %s islands (%s), policy %s; %s" % (
        t.get("nranks"), t.get("nislands"), t.get("layout"), t.get("policy"), "; ".join(islands_of(top))))
    pf = res.get("steps", {}).get("preflight", {})
    for vendor, n in sorted(pf.get("nodes", {}).items()):
        out.append("- preflight %s (%s): %s" % (vendor, n.get("node"), n.get("verdict")))
    link = res.get("steps", {}).get("link", {})
    if link:
        out.append("- link %s: alpha_hop %s us, %s GB/s (one TCP stream, %s MiB)" % (
            link.get("where"), fmt(link.get("alpha_hop_us")), fmt(link.get("bandwidth_gbps"), 3),
            (link.get("bytes") or 0) >> 20))
    out.append("")
    out.append("| rung | collective | layout | size | time (us) | busbw (GB/s) | in place (us) | #wrong "
               "| vendor alone (us) | vendor alone busbw | gpubridge / vendor time |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rungs:
        for row in r.get("rows", []):
            o, i, b = row["out_of_place"], row["in_place"], row.get("baseline")
            bo = b["out_of_place"] if b else {}
            ratio = o["time_us"] / bo["time_us"] if bo.get("time_us") else None
            out.append("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s |" % (
                r["name"], r["collective"], r["topology"].get("layout"), size(row["size_bytes"]),
                fmt(o["time_us"]), fmt(o["busbw_gbps"], 3), fmt(i["time_us"]),
                o.get("wrong", 0) + i.get("wrong", 0), fmt(bo.get("time_us")), fmt(bo.get("busbw_gbps"), 3),
                fmt(ratio, 2)))
    out.append("")
    notes = not_run(res.get("steps", {}).get("ladder", {}))
    out += notes + ([""] if notes else [])
    ar = [r for r in mixed if r["collective"] == "all_reduce"]
    if ar:
        r = ar[0]
        L = r["topology"].get("nislands") or 0
        counts = {}
        for rk in r.get("ranks", []):
            counts[rk.get("island")] = counts.get(rk.get("island"), 0) + 1
        k = min(counts.values()) if r["topology"].get("policy") == "split-rail" and counts else 1
        hosts = sorted(set(rk.get("host", "?") for rk in r.get("ranks", [])))
        one_host = len(hosts) == 1
        out.append("Bridge time of the mixed all_reduce, rank 0 (L = %d islands, k = %d rails, policy %s): "
                   "predicted = bench/scale_model.py's leader time for S / k bytes (what gpubridge runs among "
                   "the leaders: one exchange, or a ring of 2(L-1) steps) with the link step's alpha_hop and "
                   "B_link (bytes over the measured TCP bandwidth), measured = gpubridge-perf --phases' "
                   "bridge phase." % (L, k, r["topology"].get("policy")))
        if one_host:
            out.append("")
            out.append("Every rank ran on one host (%s): the leaders hand chunks over in that host's shared "
                       "memory (the streams do it, the proxy's bridge step only watches), so no byte crosses a "
                       "link, the bridge phase is not the bridge's time, and no prediction (leaders on separate "
                       "nodes) applies." % hosts[0])
        out.append("")
        out.append("| size | measured bridge (us) | predicted (us) | measured / predicted | call time (us) |")
        out.append("| ---: | ---: | ---: | ---: | ---: |")
        for row in r.get("rows", []):
            o = row["out_of_place"]
            m = (o.get("phases") or {}).get("bridge_us")
            pr = None if one_host else predicted_us(row["size_bytes"], L, k, link)
            out.append("| %s | %s | %s | %s | %s |" % (size(row["size_bytes"]), fmt(m), fmt(pr),
                                                      fmt(m / pr if m is not None and pr else None, 2),
                                                      fmt(o["time_us"])))
        out.append("")
    tr = res.get("steps", {}).get("train", {})
    if tr.get("skipped"):
        out += ["Training: not run here: %s." % tr["skipped"], ""]
    if tr.get("runs"):
        out.append("Training (tests/gpu/train_job.py, torch %s, %s steps), rank 0's loss against the "
                   "single-vendor reference (tolerance %g)%s:" % (tr.get("torch"), tr.get("steps"), tr.get("rtol"),
                                                                 "; " + tr["note"] if tr.get("note") else ""))
        out.append("")
        out.append("| run | world | first loss | last loss | max relative difference | time (s) |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, run in tr["runs"].items():
            loss = run.get("loss") or [None]
            out.append("| %s | %d | %s | %s | %s | %s |" % (
                name, run.get("world", 0), fmt(loss[0], 6), fmt(loss[-1], 6),
                "-" if "max_rel_diff" not in run else "%.3g" % run["max_rel_diff"], fmt(run.get("seconds"))))
        out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    parts = []
    for path in sys.argv[1:]:
        with open(path) as f:
            parts.append(section(json.load(f), path))
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
