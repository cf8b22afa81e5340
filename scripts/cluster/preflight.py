#!/usr/bin/env python3
"""Step 1 of the cluster kit: `gpubridge-info --preflight` on every node at
once (under Slurm one heterogeneous srun step, --ntasks-per-node=1 on the
NVIDIA node and on the AMD node, each naming both as --peers; without Slurm
on this machine alone, and with --emulated-amd once more as an emulated AMD
rank), under a hard time limit. Writes OUT/preflight.log
(every node's lines, tagged by task) and the step's part of OUT/results.json
(each node's verdict and checks). Exit 0 when every node says PASS.

    scripts/cluster/preflight.py --out DIR [--bin BUILD/bin] [--wait 60] [--timeout 180]
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

LINE = re.compile(r"^(?:\s*(\d+): )?(\S+(?: \S+)?)\s+(ok|WARN|FAIL)\s+(.*)$")


def verdicts(out):
    """{task: {"verdict", "checks"}} from the preflight's lines, each tagged "TASK: " (srun -l) or untagged (task 0)."""
    per = {}
    for raw in out.splitlines():
        m = re.match(r"^\s*(\d+): (.*)$", raw)
        task, text = (int(m.group(1)), m.group(2)) if m else (0, raw)
        node = per.setdefault(task, {"checks": {}, "verdict": ""})
        if text.startswith("preflight: "):
            node["verdict"] = text
        c = LINE.match(text)
        if c:
            node["checks"][c.group(2)] = {"status": c.group(3), "text": c.group(4)}
    return per


def emulated_twice(a, cmd, log):
    """The preflight on this machine as an NVIDIA rank, then as an emulated
    AMD rank (emulated_amd.sh), each under the step's limit: (one result with
    both runs' lines tagged "0: " and "1: " and the first failed exit, the
    command line, the order of the runs' vendors)."""
    line = ["sh", kit.EMULATED_AMD] + cmd
    out, rc, seconds = [], 0, 0.0
    for task, first_amd in enumerate((1, 0)):  # rank 0 of a job whose AMD ranks begin at first_amd
        env = dict(os.environ, RANK="0", LOCAL_RANK="0", **kit.emulated_env(a, first_amd))
        p = kit.run(line, a.timeout, env=env)
        out += ["%d: %s" % (task, text) for text in p.stdout.splitlines()]
        rc = rc or p.returncode
        seconds += p.seconds
    with open(log, "w") as f:
        f.write("$ %s (as NVIDIA rank 0, then as an emulated AMD rank 0)\n%s\n(exit %d after %.1f s)\n"
                % (" ".join(line), "\n".join(out), rc, seconds))
    res = subprocess.CompletedProcess(line, rc, "\n".join(out) + "\n")
    res.seconds = seconds
    return res, line, ["nvidia", "amd"]


def main():
    def extra(p):
        p.add_argument("--wait", type=int, default=60, help="--wait of the preflight: seconds to reach the peers")
        p.add_argument("--timeout", type=int, default=180, help="the step's hard time limit, seconds")
    a = kit.options(__doc__, extra)
    results = kit.load(a)
    kit.describe(a, results)
    info = kit.tool(a, "gpubridge-info")
    cmd = [info, "--preflight", "--port", str(a.port), "--wait", str(a.wait)]
    if a.launcher == "slurm":
        n = kit.nodes_cached(a)
        cmd += ["--peers", "%s,%s" % (n["nvidia"], n["amd"])]
        line = ["srun", "-l", "-t", str(max(1, (a.timeout + 59) // 60))]
        for k, vendor in enumerate(("nvidia", "amd")):
            line += ([":"] if k else []) + kit.component(a, vendor, 1, per_node=True) + cmd
        order = ["nvidia", "amd"]
    else:
        line, order = cmd, ["local"]
    log = os.path.join(a.out, "preflight.log")
    if a.emulated_amd:
        p, line, order = emulated_twice(a, cmd, log)
    else:
        p = kit.run(line, a.timeout, log=log)
    per = verdicts(p.stdout)
    nodes = {}
    for task, vendor in enumerate(order):
        node = per.get(task, {"checks": {}, "verdict": ""})
        node["node"] = kit.nodes_cached(a).get(vendor, results["login_host"])
        nodes[vendor] = node
    ok = p.returncode == 0 and all(n["verdict"].startswith("preflight: PASS") for n in nodes.values())
    results["steps"]["preflight"] = {"ok": ok, "exit": p.returncode, "seconds": round(p.seconds, 2),
                                     "command": " ".join(line), "log": os.path.basename(log), "nodes": nodes}
    kit.save(a, results)
    for vendor, n in nodes.items():
        print("preflight %s (%s): %s" % (vendor, n["node"], n["verdict"] or "no verdict"))
    if not ok:
        kit.die("preflight: not every node passed (exit %d); see %s" % (p.returncode, log))
    print("preflight: PASS on %d node(s) in %.1f s" % (len(nodes), p.seconds))


if __name__ == "__main__":
    main()
