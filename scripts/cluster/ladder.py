#!/usr/bin/env python3
"""Step 2 of the cluster kit: the ladder. gpubridge-perf (every result
checked, nccl-tests-style figures) on ever larger jobs, each rung under a
hard time limit, stopping at the first rung that fails:

  one-gpu-nvidia, one-gpu-amd   a job of one rank on each vendor's node
  island-nvidia, island-amd     one island of RANKS ranks on each node
  split-nvidia                  RANKS ranks of one vendor split into two
                                islands (GPUBRIDGE_SPLIT_TEST=half): the bridge
                                on one node
  mixed                         the NVIDIA node's ranks and the AMD node's in
                                one job: a heterogeneous Slurm step (nvidia
                                partition : amd partition), or gpubridge-run
                                --vendors without Slurm; with --phases, so
                                rank 0's bridge time is measured

Every one-vendor rung also runs the vendor library alone (--baseline: NCCL
or RCCL on the same GPUs) unless --simulate. Writes OUT/ladder/RUNG-COLL.log
and .json (gpubridge-perf -J) and the step's part of OUT/results.json: per
rung its command, time, exit, topology, vendor libraries, the GPUBRIDGE_*
variables rank 0 read, and every row's figures.

Without Slurm on this machine's GPUs (--launcher local), the AMD ranks run
on the emulated-AMD rig (--emulated-amd RIG) and each island gets at most
one rank per GPU (NCCL and RCCL refuse two ranks of one communicator on one
GPU): a rung that cannot run here is not run, and results.json says why
(the ladder's "skipped"), as it says why a rung ran without --baseline
("baseline_off") or with fewer ranks than --ranks ("note"). On one GPU:
one-gpu-nvidia, one-gpu-amd, split-nvidia (without --baseline) and mixed
(one rank of each vendor) run.

    scripts/cluster/ladder.py --out DIR [--collectives all_reduce,all_gather] [-b 8 -e 256M -f 4]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
import kit  # noqa: E402
from perfjob import read_json  # noqa: E402


def rungs(a):
    """(name, components [(vendor, ranks, env)], baseline applies, phases)."""
    r, m = a.ranks, kit.per_vendor(a)
    split = {"GPUBRIDGE_SPLIT_TEST": "half"}
    return [("one-gpu-nvidia", [("nvidia", 1, {})], True, False), ("one-gpu-amd", [("amd", 1, {})], True, False),
            ("island-nvidia", [("nvidia", r, {})], True, False), ("island-amd", [("amd", r, {})], True, False),
            ("split-nvidia", [("nvidia", r, split)], True, False),
            ("mixed", [("nvidia", m, {}), ("amd", m, {})], False, True)]


def islands(comps):
    """A job's islands [(vendor, ranks)]: a split-test component is two islands of half its ranks."""
    out = []
    for vendor, n, env in comps:
        out += [(vendor, n - n // 2), (vendor, n // 2)] if env.get("GPUBRIDGE_SPLIT_TEST") else [(vendor, n)]
    return out


def baseline_off(a, comps):
    """Why a one-vendor rung on GPUs runs without --baseline, or None: the
    vendor library alone is one communicator over every rank, so on this
    machine's GPUs at most one rank per GPU. (--simulate has no baseline.)"""
    n, g = sum(c[1] for c in comps), kit.real_gpus(a)
    if g and n > g:
        return ("NCCL or RCCL alone would put %d ranks of one communicator on %d GPU(s), which they refuse"
                % (n, g))
    return None


def command(a, comps, perf, limit):
    if a.launcher == "slurm":
        return kit.srun(a, comps, perf, limit), None
    return kit.local_job(a, comps, perf, limit, vendors=a.vendors if len(comps) > 1 else None)


def wrong(rows):
    return sum(r.get(k, {}).get("wrong", 0) for r in rows for k in ("out_of_place", "in_place"))


def main():
    def extra(p):
        p.add_argument("--collectives", default="all_reduce", help="comma-separated (all_reduce)")
        p.add_argument("-b", "--minbytes", default="8")
        p.add_argument("-e", "--maxbytes", default="256M")
        p.add_argument("-f", "--stepfactor", default="4")
        p.add_argument("-n", "--iters", default="20")
        p.add_argument("-w", "--warmup", default="2")
        p.add_argument("--rung-timeout", type=int, default=300, help="each rung's hard time limit, seconds (300)")
        p.add_argument("--only", help="run only the rungs whose name contains this")
    a = kit.options(__doc__, extra)
    results = kit.load(a)
    kit.describe(a, results)
    perf = kit.tool(a, "gpubridge-perf")
    d = os.path.join(a.out, "ladder")
    os.makedirs(d, exist_ok=True)
    step = {"ok": False, "rungs": [], "skipped": [], "collectives": a.collectives.split(",")}
    fewer = kit.fewer_ranks(a)
    results["steps"]["ladder"] = step
    for name, comps, baseline, phases in rungs(a):
        if a.only and a.only not in name:
            continue
        why_not = kit.cannot_run(a, islands(comps))
        if why_not:
            step["skipped"].append({"name": name, "why": why_not})
            print("rung %-15s not run here: %s" % (name, why_not))
            continue
        no_baseline = baseline_off(a, comps) if baseline else None
        for coll in step["collectives"]:
            tag = "%s-%s" % (name, coll)
            js = os.path.join(d, tag + ".json")
            if os.path.exists(js):
                os.remove(js)
            args = [perf, coll, "-b", a.minbytes, "-e", a.maxbytes, "-f", a.stepfactor, "-n", a.iters,
                    "-w", a.warmup, "-c", "1", "-J", js]
            use_baseline = baseline and not a.simulate and not no_baseline
            args += ["--baseline"] if use_baseline else []
            args += ["--phases"] if phases else []
            line, env = command(a, comps, args, a.rung_timeout)
            p = kit.run(line, a.rung_timeout, env=env, log=os.path.join(d, tag + ".log"))
            meta, rows = read_json(js) if os.path.exists(js) else ({}, [])
            rung = {"name": name, "collective": coll, "exit": p.returncode, "seconds": round(p.seconds, 2),
                    "command": " ".join(line), "log": "ladder/%s.log" % tag, "baseline": use_baseline,
                    "components": [{"vendor": v, "ranks": n, "env": e} for v, n, e in comps],
                    "topology": {k: meta.get(k) for k in ("nranks", "nislands", "layout", "policy", "mode",
                                                          "split_test", "timing")},
                    "ranks": meta.get("ranks", []), "env_rank0": meta.get("env_rank0", {}),
                    "gpubridge_version": meta.get("gpubridge_version"), "rows": rows, "wrong": wrong(rows)}
            if no_baseline:
                rung["baseline_off"] = no_baseline
            if name == "mixed" and fewer:
                rung["note"] = fewer
            rung["vendor_libraries"] = sorted(set(r.get("vendor_library") for r in rung["ranks"]
                                                  if r.get("vendor_library")))
            step["rungs"].append(rung)
            why = None
            if p.returncode == 124:
                why = "stopped at its time limit (%d s)" % a.rung_timeout
            elif p.returncode != 0:
                why = "exit %d" % p.returncode
            elif not rows:
                why = "no results in %s" % js
            elif rung["wrong"]:
                why = "%d wrong elements" % rung["wrong"]
            rung["ok"] = why is None
            kit.save(a, results)
            if why:
                tail = "\n".join(p.stdout.splitlines()[-15:])
                kit.die("ladder: rung %s (%s) failed: %s; the rungs after it were not run. Its log: %s\n%s"
                        % (name, coll, why, os.path.join(d, tag + ".log"), tail))
            big = rows[-1]
            print("rung %-15s %-14s ok: %d sizes, 0 wrong, %s, %s B: %.1f us, busbw %.3f GB/s (%.1f s)"
                  % (name, coll, len(rows), meta.get("layout"), big["size_bytes"], big["out_of_place"]["time_us"],
                     big["out_of_place"]["busbw_gbps"], p.seconds))
    step["ok"] = True
    kit.save(a, results)
    print("ladder: PASS, %d rungs%s" % (len(step["rungs"]), ", %d not run here (%s)" % (
        len(step["skipped"]), ", ".join(x["name"] for x in step["skipped"])) if step["skipped"] else ""))


if __name__ == "__main__":
    main()
