#!/usr/bin/env python3
"""The cluster kit (scripts/cluster/run.py: preflight, ladder, link,
training check, tables) end to end on the real Slurm of slurm_rig.py
(partition nvidia on gbn1, amd on gbn2), simulated vendors (--simulate),
small sizes and few steps, run from the controller host as an operator
runs it from a login node. Checks the results file: every step ok, every
rung present with its figures and 0 wrong, the mixed rung a heterogeneous
job over both nodes (2 islands, ranks on gbn1 and gbn2), the metadata
(gpubridge's version and build, GPUBRIDGE_* of rank 0, topology, preflight
verdicts of both nodes, the link's figures), the training runs against the
reference; and that tables.py prints a ladder row per rung and size, a
bridge row per size and a training row per run. Then nothing of the
cluster may remain. Also the local launcher's plan for one NVIDIA GPU
(--gpus 1), which needs no GPU to check: the ladder does not run a rung
whose island needs more GPUs, nor one with AMD ranks without
--emulated-amd, and results.json says why.

Needs root (namespaces), slurm-wlm + munge (as test_slurm) and torch (the
training check); skips, saying why, only where the rig cannot run here.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import slurm_rig  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GB_TEST_BUILD_DIR") or harness.BUILD_DIR)
SRC = os.path.abspath(os.environ.get("GB_TEST_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."))
KIT = os.path.join(SRC, "scripts", "cluster")
RUNGS = ["one-gpu-nvidia", "one-gpu-amd", "island-nvidia", "island-amd", "split-nvidia", "mixed"]
SIZES = [8, 256, 8192, 262144]


def job_env():
    drop = ("GPUBRIDGE_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "OMPI_", "PMIX_", "TORCHELASTIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(GPUBRIDGE_TIMEOUT="20", GPUBRIDGE_SOCKET_IFNAME="gb0")
    return env


def check_results(suite, res):
    steps = res.get("steps", {})
    suite.check(all(steps.get(s, {}).get("ok") for s in ("preflight", "ladder", "link", "train")),
                "every step ok: preflight, ladder, link, train", json.dumps({s: steps.get(s, {}).get("ok")
                                                                             for s in steps}))
    gb = res.get("gpubridge", {})
    suite.check(gb.get("version") and gb.get("build", {}).get("library") and gb.get("build", {}).get("compiler"),
                "metadata: gpubridge %s, build %s" % (gb.get("version"), gb.get("build", {}).get("compiler")),
                json.dumps(gb))
    suite.check(res.get("nodes") == {"nvidia": "gbn1", "amd": "gbn2"} and res.get("launcher") == "slurm",
                "metadata: launcher slurm, nodes nvidia gbn1, amd gbn2", json.dumps(res.get("nodes")))
    pf = steps.get("preflight", {}).get("nodes", {})
    suite.check(sorted(pf) == ["amd", "nvidia"] and all(n["verdict"].startswith("preflight: PASS") and
                                                        n["checks"].get("peer", {}).get("status") == "ok"
                                                        for n in pf.values()),
                "preflight: both nodes PASS, each reached its peer", json.dumps(pf)[:2000])
    rungs = steps.get("ladder", {}).get("rungs", [])
    suite.check([r["name"] for r in rungs] == RUNGS, "ladder: every rung, in order (%s)" % ", ".join(RUNGS),
                str([r["name"] for r in rungs]))
    for r in rungs:
        sizes = [row["size_bytes"] for row in r["rows"]]
        figures = all(row["out_of_place"]["time_us"] > 0 and "busbw_gbps" in row["out_of_place"] for row in r["rows"])
        suite.check(r["ok"] and r["wrong"] == 0 and sizes == SIZES and figures and r["env_rank0"],
                    "rung %s: %d sizes with figures, 0 wrong, GPUBRIDGE_* of rank 0 kept (%.1f s)"
                    % (r["name"], len(sizes), r["seconds"]), json.dumps(r)[:2000])
    mixed = rungs[-1] if rungs else {}
    hosts = sorted(set((rk["host"], rk["vendor"]) for rk in mixed.get("ranks", [])))
    suite.check(mixed.get("topology", {}).get("nislands") == 2 and mixed["topology"].get("nranks") == 4 and
                hosts == [("gbn1", "nvidia"), ("gbn2", "amd")] and " : " in mixed.get("command", ""),
                "mixed: a heterogeneous step, 4 ranks, islands nvidia on gbn1 and amd on gbn2",
                json.dumps(mixed.get("topology")) + str(hosts))
    suite.check(all("bridge_us" in row["out_of_place"].get("phases", {}) for row in mixed.get("rows", [{}])),
                "mixed: rank 0's bridge phase measured at every size")
    link = steps.get("link", {})
    suite.check(link.get("alpha_hop_us", 0) > 0 and link.get("bandwidth_gbps", 0) > 0 and
                link.get("where") == "gbn1 -> gbn2",
                "link gbn1 -> gbn2: alpha_hop %.1f us, %.3f GB/s" % (link.get("alpha_hop_us", 0),
                                                                     link.get("bandwidth_gbps", 0)), json.dumps(link))
    tr = steps.get("train", {})
    want = ["ddp", "reference"] + (["fsdp"] if tr.get("fsdp2") else [])
    suite.check(sorted(tr.get("runs", {})) == sorted(want) and
                all(tr["runs"][n]["max_rel_diff"] <= tr["rtol"] for n in want if n != "reference"),
                "train: %s against the single-vendor reference, within %g" % (", ".join(sorted(want)),
                                                                              tr.get("rtol", 0)),
                json.dumps(tr)[:2000])


def check_tables(suite, text):
    lines = text.splitlines()
    ladder = [l for l in lines if l.startswith("| ") and any(l.startswith("| %s | all_reduce |" % r) for r in RUNGS)]
    suite.check(len(ladder) == len(RUNGS) * len(SIZES), "tables: a ladder row per rung and size (%d)" % len(ladder),
                text[:3000])
    bridge = [l for l in lines if l.startswith("| ") and l.count("|") == 6 and l.split("|")[1].strip().endswith("B")
              and l.split("|")[3].strip() not in ("-", "")]
    suite.check(len(bridge) == len(SIZES), "tables: a predicted-against-measured bridge row per size (%d)"
                % len(bridge), text[:3000])
    suite.check(sum(l.startswith(("| ddp |", "| reference |", "| fsdp |")) for l in lines) >= 2 and
                "GPUBRIDGE_* read by rank 0: " in text and "vendor libraries: " in text,
                "tables: training rows and the metadata lines", text[:3000])


def check_one_gpu_plan(suite):
    rig = os.path.join(BUILD, "tests", "emulated_amd")
    two = "needs 2 GPUs"
    cases = ((["--emulated-amd", rig, "--only", "island"], {"island-nvidia": two, "island-amd": two}),
             (["--only", "mixed"], {"mixed": "--emulated-amd RIG"}))
    for args, want in cases:
        with tempfile.TemporaryDirectory() as d:
            cmd = [sys.executable, os.path.join(KIT, "ladder.py"), "--out", d, "--bin", os.path.join(BUILD, "bin"),
                   "--launcher", "local", "--gpus", "1"] + args
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=harness.scaled(60), env=job_env())
            path = os.path.join(d, "results.json")
            step = json.load(open(path))["steps"]["ladder"] if os.path.exists(path) else {}
        got = {x["name"]: x["why"] for x in step.get("skipped", [])}
        suite.check(p.returncode == 0 and step.get("rungs") == [] and sorted(got) == sorted(want) and
                    all(want[n] in got[n] for n in want),
                    "one GPU, local launcher, %s: not run, with the reason (%s)" % (" ".join(args[-2:]),
                                                                                  ", ".join(want)),
                    "rc %d\n%s\n%s" % (p.returncode, p.stdout[-2000:], json.dumps(step)[:2000]))


def run_kit(suite, c):
    out = os.path.join(c.dir, "kit")
    cmd = [sys.executable, os.path.join(KIT, "run.py"), "--out", out, "--bin", os.path.join(BUILD, "bin"),
           "--launcher", "slurm", "--simulate", "--ranks", "2",
           "--ladder-args", "-b 8 -e 256K -f 32 -n 3 -w 1 --rung-timeout %d" % harness.scaled(60),
           "--preflight-args", "--wait 20 --timeout %d" % harness.scaled(60),
           "--link-args", "--mib 16 --python %s --timeout %d" % (sys.executable, harness.scaled(60)),
           "--train-args", "--python %s --steps 3 --width 256 --timeout %d" % (sys.executable, harness.scaled(90))]
    t0 = time.monotonic()
    p = c.ctl(cmd, timeout=harness.scaled(240), env=job_env())
    took = time.monotonic() - t0
    suite.check(p.returncode == 0 and "kit: PASS" in p.stdout, "the kit: exit 0, PASS (%.1f s)" % took,
                "rc %d\n%s\n%s" % (p.returncode, p.stdout[-5000:], p.stderr[-3000:]))
    path = os.path.join(out, "results.json")
    if suite.check(os.path.exists(path), "the results file is written", path):
        with open(path) as f:
            check_results(suite, json.load(f))
    tables = os.path.join(out, "tables.md")
    text = open(tables).read() if os.path.exists(tables) else ""
    check_tables(suite, text)
    check_one_gpu_plan(suite)


def main():
    suite = harness.Suite("test_cluster_kit")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: the training check needs torch in %s (make test's .venv has it)" % sys.executable)
        sys.exit(77)
    slurm_rig.run_suite(suite, run_kit, harness.scaled(30))


if __name__ == "__main__":
    main()
