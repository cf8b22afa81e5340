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
    elif a.emulated_amd:
        line = ["sh", "-c", 'sh "$0" "$@" 2>&1 | sed "s/^/0: /"; GB_KIT_AMD_FROM=0 sh "$0" "$@" 2>&1 | sed "s/^/1: /"',
                kit.EMULATED_AMD] + cmd  # the NVIDIA rank (emulated_env's first AMD rank is 1), then an AMD one
        order = ["nvidia", "amd"]
    else:
        line, order = cmd, ["local"]
    log = os.path.join(a.out, "preflight.log")
    p = kit.run(line, a.timeout, env=dict(os.environ, **kit.emulated_env(a, 1)) if a.emulated_amd else None, log=log)
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
