"""Where a bridged collective's time goes, drawn from gpubridge-perf output;
with --kind bandwidth, bus bandwidth against size (_plot_bandwidth.py).

    gpubridge-run -n 4 --vendors nvidia:2,amd:2 -- \\
        gpubridge-perf all_reduce -b 8 -e 64M -f 4 --phases -J perf.json
    python -m gpubridge.plot perf.json -o phases.png [--form in_place]
    python -m gpubridge.plot perf.json [other.json ...] --kind bandwidth -o busbw.png

One stacked bar per size: the share of rank 0's mean time per call spent in
each phase (check, island, wait, bridge, after; tools/perf/README.md), with
the row's measured time above it. One panel per (collective, type, op) in the file. The
same numbers are always written as CSV next to the picture (phases.csv).
matplotlib is optional: without it only the CSV is written, and the command
says so. No GPU, torch or libgpubridge is needed.
"""
import argparse
import os
import sys

from . import _plot_bandwidth
from . import _perf_json
from ._perf_json import InputError, json_rows

PHASES = ("check", "island", "wait", "bridge", "after")
COLORS = ("#9e9e9e", "#4c72b0", "#dd8452", "#c44e52", "#55a868")
CSV_FIELDS = ("collective", "type", "redop", "form", "size_bytes", "time_us") + tuple(
    p + "_us" for p in PHASES) + ("records",)


def read_rows(paths, form):
    """The rows of gpubridge-perf -J files that carry phases for form, as CSV dicts."""
    out = []
    for path, n, row in json_rows(paths):
        half = row.get(form) if isinstance(row, dict) else None
        ph = half.get("phases") if isinstance(half, dict) else None
        if not isinstance(ph, dict):
            continue
        try:
            rec = {"collective": row["collective"], "type": row["type"], "redop": row["redop"], "form": form,
                   "size_bytes": int(row["size_bytes"]), "time_us": float(half["time_us"]),
                   "records": int(ph["records"])}
            for p in PHASES:
                rec[p + "_us"] = float(ph[p + "_us"])
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("%s:%d: a row with phases lacks %s" % (path, n, e)) from None
        out.append(rec)
    if not out:
        raise InputError("%s: no %s rows with phases; run gpubridge-perf with --phases -J FILE"
                         % (", ".join(paths), form))
    return out


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def series(rows):
    """{(collective, type, redop): rows in size order}, in the order first seen."""
    out = {}
    for r in rows:
        out.setdefault((r["collective"], r["type"], r["redop"]), []).append(r)
    for k in out:
        out[k].sort(key=lambda r: r["size_bytes"])
    return out


def write_csv(rows, path):
    _perf_json.write_csv(rows, path, CSV_FIELDS)


def draw(rows, path, title):
    """Writes the PNG; returns False when matplotlib is not installed."""
    plt = _perf_json.pyplot()
    if plt is None:
        return False
    groups = series(rows)
    fig, axes = plt.subplots(len(groups), 1, figsize=(max(6.0, 0.7 * max(len(v) for v in groups.values()) + 2),
                                                        4.2 * len(groups)), squeeze=False)
    for ax, ((coll, dtype, op), rs) in zip(axes[:, 0], groups.items()):
        x = list(range(len(rs)))
        bottom = [0.0] * len(rs)
        for p, color in zip(PHASES, COLORS):
            share = [100.0 * r[p + "_us"] / max(1e-12, sum(r[q + "_us"] for q in PHASES)) for r in rs]
            ax.bar(x, share, bottom=bottom, color=color, label=p, width=0.7)
            bottom = [b + v for b, v in zip(bottom, share)]
        for i, r in enumerate(rs):
            label = ("%.0f us" if r["time_us"] >= 1000 else "%.3g us") % r["time_us"]
            ax.text(i, 101, label, ha="center", va="bottom", fontsize="small")
        ax.set_xticks(x)
        ax.set_xticklabels([size_label(r["size_bytes"]) for r in rs])
        ax.set_ylim(0, 112)
        ax.set_xlabel("size (bytes); above each bar: the measured time per call")
        ax.set_ylabel("share of a call's time (%)")
        ax.set_title("%s %s%s, %s: rank 0's time per phase" % (coll, dtype, "" if op == "none" else " " + op,
                                                                rs[0]["form"].replace("_", "-")))
        ax.legend(fontsize="small", ncol=5, loc="lower center", bbox_to_anchor=(0.5, -0.42))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gpubridge.plot", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", metavar="FILE.json", help="gpubridge-perf --phases -J output")
    ap.add_argument("-o", "--output", default="phases.png", help="the PNG to write (default phases.png); "
                    "the CSV goes next to it with the suffix .csv")
    ap.add_argument("--form", choices=("out_of_place", "in_place"), default="out_of_place",
                    help="which form's phases to draw (default out_of_place)")
    ap.add_argument("--title", default="", help="a title above the panels")
    ap.add_argument("--kind", choices=("phases", "bandwidth"), default="phases",
                    help="phases (default): each size's time per phase; bandwidth: busbw against size, with "
                    "--baseline's vendor library where the run had it, one line per file and form")
    args = ap.parse_args(argv)
    kind = _plot_bandwidth if args.kind == "bandwidth" else None
    try:
        rows = kind.read_rows(args.files) if kind else read_rows(args.files, args.form)
    except InputError as e:
        print("gpubridge.plot: %s" % e, file=sys.stderr)
        return 1
    csv_path = os.path.splitext(args.output)[0] + ".csv"
    (kind.write_csv if kind else write_csv)(rows, csv_path)
    drawn = kind.draw(rows, args.output, args.title, size_label) if kind else draw(rows, args.output, args.title)
    if drawn:
        print("gpubridge.plot: wrote %s and %s (%d rows)" % (args.output, csv_path, len(rows)))
    else:
        print("gpubridge.plot: matplotlib is not installed, so no picture: wrote %s only (%d rows); "
              "pip install matplotlib for %s" % (csv_path, len(rows), args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
