#!/usr/bin/env python3
"""gpubridge under a real Slurm (slurm-wlm with munge, slurm_rig.py): a
controller and two nodes, each an emulated host with its own network, name
and slurmd; partition nvidia is node gbn1, partition amd node gbn2. Ranks
run gpubridge-perf (it validates every result) with no MASTER_ADDR and no
MASTER_PORT: gbCommInitFromEnv reads Slurm's variables alone (world size,
rank, the rendezvous on the node of task 0, a port from the job's id).

- `srun -n 4` on one node, GPUBRIDGE_VENDORS=nvidia:2,amd:2: 4 ranks, 2
  islands, every size right;
- `srun -p amd -n 2 : -p nvidia -n 2`, a heterogeneous step whose component
  0 is on gbn2 although Slurm lists the step's nodes as gbn[1-2]: every rank
  must find the rendezvous on gbn2 (component 0's first node), the amd
  component's ranks amd, the nvidia component's nvidia (srun --export per
  component);
- `sbatch` of a heterogeneous job (`#SBATCH hetjob`: 2 tasks in partition
  nvidia, 2 in amd) whose script runs one srun over both components: 4 ranks
  on 2 nodes, islands nvidia (ranks 0-1 on gbn1) and amd (ranks 2-3 on
  gbn2), every size right;
- after the cluster is stopped no slurmctld, slurmd, slurmstepd or munged
  of it, no namespace and no temporary folder remains.

Needs root (namespaces) and slurm-wlm + munge (make test installs them);
skips, saying why, only where they cannot be installed or run here.
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import slurm_rig  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GB_TEST_BUILD_DIR") or harness.BUILD_DIR)
PERF = [os.path.join(BUILD, "bin", "gpubridge-perf"), "all_reduce", "-b", "8", "-e", "1M", "-f", "16", "-n", "2"]
JOB_ENV = {"GPUBRIDGE_TIMEOUT": "20", "GPUBRIDGE_DEBUG": "INFO", "GPUBRIDGE_DEBUG_SUBSYS": "INIT"}
ISLANDS = "4 ranks, 2 islands (nvidia: ranks 0-1, amd: ranks 2-3)"


def job_env():
    """The submitter's environment for a job: none of the suite's own launcher or gpubridge variables."""
    drop = ("GPUBRIDGE_", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "OMPI_", "PMIX_", "TORCHELASTIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(JOB_ENV)
    return env


def by_task(text):
    """srun --label output: {task: [lines]}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+): (.*)", line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def check_perf(suite, name, text, islands, nodes, rendezvous, why):
    """Task 0's table (islands, every row #wrong 0), the node of every rank,
    and every rank saying where the rendezvous is."""
    tasks = by_task(text)
    t0 = tasks.get(0, [])
    rows = [l for l in t0 if l.strip() and not l.lstrip().startswith("#") and re.match(r"\s*\d+\s+\d+\s", l)]
    wrong = [l for l in rows if l.split()[8] != "0" or l.split()[12] != "0"]
    head = next((l for l in t0 if "gpubridge-perf all_reduce:" in l), "")
    suite.check(len(rows) >= 4 and not wrong and islands in head,
                "%s: %d sizes validated, task 0 says \"%s\"" % (name, len(rows), islands),
                "" if rows and not wrong and islands in head else text[-4000:])
    where = {}
    for l in t0:
        m = re.match(r"#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device (\S+)", l)
        if m:
            where[int(m.group(1))] = (m.group(2), m.group(3))
    suite.check(where == nodes, "%s: ranks on nodes and devices %s" % (name, nodes), "got %s" % where)
    said = [r for r, ls in tasks.items() if any("MASTER_ADDR is not set: the rendezvous is on %s, the first node of %s"
                                                 % (rendezvous, why) in l for l in ls)]
    suite.check(sorted(said) == [0, 1, 2, 3], "%s: every rank finds the rendezvous on %s (%s)" % (name, rendezvous, why),
                "ranks that said so: %s\n%s" % (said, text[-3000:]))


def srun_one_node(suite, c):
    name = "srun -n 4"
    t0 = time.monotonic()
    env = job_env()
    env["GPUBRIDGE_VENDORS"] = "nvidia:2,amd:2"
    p = c.ctl(["srun", "-l", "-n", "4", "-p", "nvidia"] + PERF, timeout=harness.scaled(60), env=env)
    suite.check(p.returncode == 0, "%s: exit 0 (%.1f s)" % (name, time.monotonic() - t0),
                "rc %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    nodes = {0: ("gbn1", "nvidia"), 1: ("gbn1", "nvidia"), 2: ("gbn1", "amd"), 3: ("gbn1", "amd")}
    check_perf(suite, name, p.stdout + p.stderr, ISLANDS, nodes, "gbn1", "SLURM_STEP_NODELIST")


def srun_het(suite, c):
    name = "srun -p amd -n 2 : -p nvidia -n 2"
    t0 = time.monotonic()
    p = c.ctl(["srun", "-l", "-p", "amd", "-n", "2", "--export=ALL,GPUBRIDGE_VENDOR=amd"] + PERF +
              [":", "-p", "nvidia", "-n", "2", "--export=ALL,GPUBRIDGE_VENDOR=nvidia"] + PERF,
              timeout=harness.scaled(60), env=job_env())
    suite.check(p.returncode == 0, "%s: exit 0 (%.1f s)" % (name, time.monotonic() - t0),
                "rc %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    nodes = {0: ("gbn2", "amd"), 1: ("gbn2", "amd"), 2: ("gbn1", "nvidia"), 3: ("gbn1", "nvidia")}
    check_perf(suite, name, p.stdout + p.stderr, "4 ranks, 2 islands (amd: ranks 0-1, nvidia: ranks 2-3)", nodes,
               "gbn2", "the heterogeneous job's component 0")


SCRIPT = """#!/bin/sh
#SBATCH --job-name=gbhet
#SBATCH -p nvidia -n 2
#SBATCH hetjob
#SBATCH -p amd -n 2
# gpubridge across two islands: the nvidia component's ranks simulate
# nvidia GPUs, the amd component's amd GPUs; one srun spans both.
echo "batch on $(hostname): components $SLURM_HET_SIZE, nodes $SLURM_JOB_NODELIST_HET_GROUP_0 + \\
$SLURM_JOB_NODELIST_HET_GROUP_1"
srun -l --het-group=0 --export=ALL,GPUBRIDGE_VENDOR=nvidia {perf} : \\
     --het-group=1 --export=ALL,GPUBRIDGE_VENDOR=amd {perf}
"""


def sbatch_het(suite, c):
    name = "sbatch hetjob (nvidia 2 + amd 2)"
    t0 = time.monotonic()
    script = os.path.join(c.dir, "het.sbatch")
    out = os.path.join(c.dir, "het-%j.out")
    with open(script, "w") as f:
        f.write(SCRIPT.format(perf=" ".join(PERF)))
    p = c.ctl(["sbatch", "--parsable", "-o", out, script], env=job_env())
    if not suite.check(p.returncode == 0 and p.stdout.strip(), "%s: submitted" % name,
                       "rc %d\n%s%s" % (p.returncode, p.stdout, p.stderr)):
        return
    job = p.stdout.strip().split(";")[0].split("+")[0]
    states = c.wait_job(job, harness.scaled(60))
    suite.check(states is not None and all(s == "COMPLETED" for s in states),
                "%s: job %s COMPLETED in every component (%.1f s)" % (name, job, time.monotonic() - t0),
                "states %s\n%s" % (states, c.logs()))
    path = out.replace("%j", job)
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    suite.check("components 2, nodes gbn1 + gbn2" in text, "%s: the batch script saw 2 components on gbn1 + gbn2"
                % name, text[:2000])
    nodes = {0: ("gbn1", "nvidia"), 1: ("gbn1", "nvidia"), 2: ("gbn2", "amd"), 3: ("gbn2", "amd")}
    check_perf(suite, name, text, ISLANDS, nodes, "gbn1", "the heterogeneous job's component 0")


def main():
    suite = harness.Suite("test_slurm")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""

    def cases(suite, c):
        for case in (srun_one_node, srun_het, sbatch_het):
            if only in case.__name__:
                case(suite, c)
    slurm_rig.run_suite(suite, cases, harness.scaled(30))


if __name__ == "__main__":
    main()
