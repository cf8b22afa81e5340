#!/usr/bin/env python3
"""Step 4 of the cluster kit: training on the torch.distributed backend
"gpubridge" across the NVIDIA node and the AMD node, against a
single-vendor run. tests/gpu/train_job.py (a small MLP, fixed seeds, a few
checked collectives first) runs
  - as the reference: one rank on the NVIDIA node training on the batches
    of all ranks at once (--plays W: the same global step, one vendor, no
    bridge);
  - under DDP on RANKS ranks of each node (a heterogeneous Slurm step, or
    gpubridge-run --vendors without Slurm);
  - under FSDP2 (fully_shard) the same way, where this torch has it;
and tests/gpu/compare_losses.py compares rank 0's loss at every step with
the reference's (--rtol). Each run under a hard time limit; on --simulate
CPU tensors (--device cpu). Without Slurm on this machine's GPUs, the AMD
ranks run on the emulated-AMD rig (--emulated-amd RIG) and each vendor gets
at most one rank per GPU (with one GPU: a world of 2, the reference playing
2 ranks); results.json's "note" says so. Writes OUT/train/*.txt and the
step's part of OUT/results.json (the curves, the comparison, torch's
version).

    scripts/cluster/train.py --out DIR [--python python3] [--steps 20] [--width 2048] [--rtol 1e-5]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

ROOT = os.path.normpath(os.path.join(kit.HERE, os.pardir, os.pardir))
JOB = os.path.join(ROOT, "tests", "gpu", "train_job.py")
COMPARE = os.path.join(ROOT, "tests", "gpu", "compare_losses.py")
WRAP = os.path.join(kit.HERE, "torch_env.sh")
CURVE = re.compile(r"loss-curve (\w+) step (\d+) loss (\S+)")


def main():
    def extra(p):
        p.add_argument("--python", default="python3", help="the nodes' Python, with torch (python3)")
        p.add_argument("--steps", type=int, default=20)
        p.add_argument("--width", type=int, default=2048, help="the hidden layer's width (2048)")
        p.add_argument("--rtol", type=float, default=1e-5, help="largest relative loss difference (1e-5)")
        p.add_argument("--timeout", type=int, default=300, help="each run's hard time limit, seconds (300)")
    a = kit.options(__doc__, extra)
    results = kit.load(a)
    kit.describe(a, results)
    d = os.path.join(a.out, "train")
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ)
    lib = os.path.join(results["gpubridge"]["bin"], os.pardir, "lib", "libgpubridge.so")
    if "GPUBRIDGE_LIBRARY" not in env and os.path.exists(lib):
        env["GPUBRIDGE_LIBRARY"] = os.path.normpath(lib)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] + [x for x in [env.get("PYTHONPATH")] if x])
    step = {"ok": False, "runs": {}, "python": a.python, "rtol": a.rtol, "steps": a.steps}
    results["steps"]["train"] = step
    probe = kit.run([a.python, "-c", "import torch; print(torch.__version__)\n"
                     "try:\n from torch.distributed.fsdp import fully_shard; print('fsdp2')\n"
                     "except ImportError: print('no fsdp2')"], 120, env=env)
    if probe.returncode != 0:
        kit.save(a, results)
        kit.die("train: %s cannot import torch: %s" % (a.python, probe.stdout.strip()[-500:]))
    step["torch"] = probe.stdout.split()[0]
    fsdp = "fsdp2" in probe.stdout.split()
    step["fsdp2"] = fsdp
    job = [a.python, JOB, "--backend", "gpubridge", "--steps", str(a.steps), "--width", str(a.width),
           "--device", "cpu" if a.simulate else "cuda"]
    per, fewer = kit.per_vendor(a), kit.fewer_ranks(a)
    if fewer:
        step["note"] = fewer
    why_not = kit.cannot_run(a, [("nvidia", per), ("amd", per)])
    if why_not:
        step.update(ok=True, skipped=why_not)
        kit.save(a, results)
        print("train: not run here: %s" % why_not)
        return
    world = 2 * per
    runs = [("reference", [("nvidia", 1)], ["--plays", str(world)])]
    runs += [("ddp", [("nvidia", per), ("amd", per)], [])]
    runs += [("fsdp", [("nvidia", per), ("amd", per)], ["--fsdp"])] if fsdp else []
    if a.launcher == "slurm":
        env["MASTER_ADDR"] = kit.nodes_cached(a)["nvidia"]
        env["MASTER_PORT"] = str(a.port + 2)
    for name, comps, flags in runs:
        if a.launcher == "slurm":
            line, run_env = kit.srun(a, [(v, n, {}) for v, n in comps], ["sh", WRAP] + job + flags, a.timeout), env
        else:
            line, run_env = kit.local_job(a, [(v, n, {}) for v, n in comps], job + flags, a.timeout, env)
        out = os.path.join(d, name + ".txt")
        p = kit.run(line, a.timeout, env=run_env, log=out)
        curve = {int(m.group(2)): float(m.group(3)) for m in CURVE.finditer(p.stdout)}
        step["runs"][name] = {"exit": p.returncode, "seconds": round(p.seconds, 2), "command": " ".join(line),
                              "log": "train/%s.txt" % name, "world": sum(n for _, n in comps),
                              "loss": [curve[s] for s in sorted(curve)]}
        kit.save(a, results)
        if p.returncode != 0 or len(curve) != a.steps:
            kit.die("train: the %s run failed (exit %d, %d of %d steps); see %s\n%s" % (
                name, p.returncode, len(curve), a.steps, out, "\n".join(p.stdout.splitlines()[-15:])))
        print("train %-9s ok: world %d, %d steps, loss %.6g -> %.6g (%.1f s)"
              % (name, step["runs"][name]["world"], a.steps, curve[0], curve[a.steps - 1], p.seconds))
    names = [n for n, _, _ in runs]
    p = kit.run([sys.executable, COMPARE, "--rtol", str(a.rtol)] + [os.path.join(d, n + ".txt") for n in names],
                60, log=os.path.join(d, "compare.txt"))
    print(p.stdout.rstrip())
    step["compare"] = {"exit": p.returncode, "output": p.stdout.strip().splitlines()}
    ref = step["runs"]["reference"]["loss"]
    for n in names[1:]:
        run = step["runs"][n]
        run["max_rel_diff"] = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(run["loss"], ref))
    step["ok"] = p.returncode == 0
    kit.save(a, results)
    if not step["ok"]:
        kit.die("train: loss curves differ from the single-vendor reference by more than %g" % a.rtol)
    print("train: PASS (%s against the single-vendor reference)" % ", ".join(names[1:]))


if __name__ == "__main__":
    main()
