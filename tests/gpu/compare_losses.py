#!/usr/bin/env python3
"""Compares the loss curves and final-parameter digests that
tests/gpu/train_job.py printed in several runs ("loss-curve MODE step S loss
L" lines of rank 0, "MODE-result rank 0 ... checksum C"): the first file is
the reference. Prints, per run, the steps compared, the largest relative
difference of a step's loss from the reference's and whether the digest is
the reference's; exits 1 when a curve is missing, has other steps, or
differs by more than --rtol at some step.

    compare_losses.py [--rtol 1e-5] REFERENCE RUN...
"""
import argparse
import re
import sys

CURVE = re.compile(r"loss-curve (\w+) step (\d+) loss (\S+)")
RESULT = re.compile(r"(\w+)-result rank 0 .* checksum (-?\d+)")


def read(path):
    curve, digest = {}, None
    for line in open(path, errors="replace"):
        m = CURVE.search(line)
        if m:
            curve[int(m.group(2))] = float(m.group(3))
        m = RESULT.search(line)
        if m:
            digest = m.group(2)
    return curve, digest


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("reference")
    p.add_argument("runs", nargs="+")
    a = p.parse_args()
    ref, ref_digest = read(a.reference)
    if not ref:
        print("FAIL: no loss-curve lines in the reference %s" % a.reference)
        return 1
    bad = 0
    for path in a.runs:
        curve, digest = read(path)
        if sorted(curve) != sorted(ref):
            print("FAIL: %s: steps %s, reference has %s" % (path, sorted(curve), sorted(ref)))
            bad += 1
            continue
        worst = max(abs(curve[s] - ref[s]) / max(abs(ref[s]), 1e-30) for s in ref)
        same = "same digest" if digest == ref_digest else "digest %s, reference %s" % (digest, ref_digest)
        ok = worst <= a.rtol
        print("%s: %s: %d steps, first loss %.9g, last %.9g, max relative difference %.3g (tolerance %g), %s"
              % ("PASS" if ok else "FAIL", path, len(curve), curve[min(curve)], curve[max(curve)], worst, a.rtol,
                 same))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
