#!/usr/bin/env python3
"""The whole cluster kit, in order, each step under its own hard time limit,
stopping at the first that fails: preflight.py, ladder.py, link.py,
train.py, then tables.py on the results file (printed, and written to
OUT/tables.md). Options not listed here go to every step (--bin, --launcher,
--nodes, --ranks, --simulate, --port, ...); step options are given as
--preflight-args, --ladder-args, --link-args, --train-args ("..." each).

    scripts/cluster/run.py --out DIR [--bin BUILD/bin] [--ladder-args "-e 256M --collectives all_reduce,all_gather"]
"""
import argparse
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = ("preflight", "ladder", "link", "train")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    for s in STEPS:
        p.add_argument("--%s-args" % s, default="", help="options of %s.py only" % s)
    a, common = p.parse_known_args()
    t0 = time.monotonic()
    for s in STEPS:
        cmd = [sys.executable, os.path.join(HERE, s + ".py"), "--out", a.out] + common + \
            shlex.split(getattr(a, s + "_args"))
        print("== step %s: %s" % (s, " ".join(cmd)), flush=True)
        rc = subprocess.call(cmd)
        if rc != 0:
            print("kit: FAIL at step %s (exit %d); results so far in %s" % (s, rc, os.path.join(a.out, "results.json")))
            return 1
    res = os.path.join(os.path.abspath(a.out), "results.json")
    tables = subprocess.run([sys.executable, os.path.join(HERE, "tables.py"), res], capture_output=True, text=True)
    with open(os.path.join(a.out, "tables.md"), "w") as f:
        f.write(tables.stdout)
    print(tables.stdout)
    print("kit: PASS, every step, in %.1f s; results %s, tables %s" % (time.monotonic() - t0, res,
                                                                      os.path.join(a.out, "tables.md")))
    return tables.returncode


if __name__ == "__main__":
    sys.exit(main())
