#!/usr/bin/env python3
"""Plots gpubridge-perf -J files: busbw against size of gpubridge and, where
the run had --baseline, of the vendor library alone; prints a markdown table.
Usage: plot_perf_json.py OUT.png "title" LABEL=FILE.json [LABEL=FILE.json ...]
[--column in_place|out_of_place] (default out_of_place)."""
import argparse

from perfjob import read_json
from plot import plot_busbw
from report import human


def half_series(rows, pick, column):
    out = {}
    for r in rows:
        half = pick(r)
        half = half.get(column) if half else None
        if half:
            out[r["size_bytes"]] = half
    return out


p = argparse.ArgumentParser()
p.add_argument("png")
p.add_argument("title")
p.add_argument("runs", nargs="+", help="LABEL=FILE.json")
p.add_argument("--column", default="out_of_place")
a = p.parse_args()

named, modes = {}, []
for item in a.runs:
    label, path = item.split("=", 1)
    meta, rows = read_json(path)
    named["gpubridge, " + label] = half_series(rows, lambda r: r, a.column)
    base = [r["baseline"] for r in rows if "baseline" in r]
    if base:
        named["%s alone, %s" % (base[0]["library"], label)] = half_series(rows, lambda r: r.get("baseline"), a.column)
    modes.append("%s: %s, %d ranks" % (label, meta.get("mode_label", "?"), meta.get("nranks", 0)))
plot_busbw(a.png, a.title, named, "; ".join(modes) + "; " + a.column.replace("_", " "))
names = list(named)
print("| size | " + " | ".join("%s busbw (GB/s)" % n for n in names) + " |")
print("|" + "---|" * (1 + len(names)))
for size in sorted(set().union(*named.values())):
    print("| %s | %s |" % (human(size), " | ".join("%.2f" % named[n][size]["busbw_gbps"] if size in named[n] else "-"
                                                   for n in names)))
