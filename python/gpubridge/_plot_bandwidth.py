"""python -m gpubridge.plot --kind bandwidth: bus bandwidth against size, as
nccl-tests users plot it, from gpubridge-perf -J files: per (collective,
type, op) one panel with gpubridge's out-of-place and in-place busbw and,
where the run had --baseline, the vendor library's alone on the same sizes.
Several files (runs) draw side by side in one panel, each labelled by its
file name. The same numbers go to a CSV next to the picture."""
import os

from . import _perf_json
from ._perf_json import InputError, json_rows

FORMS = ("out_of_place", "in_place")
CSV_FIELDS = ("run", "collective", "type", "redop", "library", "form", "size_bytes", "time_us", "busbw_gbps",
              "algbw_gbps")


def _halves(row):
    """(library, form, half) of a row: gpubridge's, then its baseline's."""
    for form in FORMS:
        yield "gpubridge", form, row.get(form)
    base = row.get("baseline")
    if isinstance(base, dict):
        for form in FORMS:
            yield str(base.get("library", "baseline")), form, base.get(form)


def read_rows(paths):
    out = []
    for path, n, row in json_rows(paths):
        if not isinstance(row, dict) or "size_bytes" not in row:
            continue  # the metadata line
        run = os.path.splitext(os.path.basename(path))[0]
        try:
            for library, form, half in _halves(row):
                if not isinstance(half, dict):
                    continue  # a form the collective lacks (null)
                out.append({"run": run, "collective": row["collective"], "type": row["type"],
                            "redop": row["redop"], "library": library, "form": form,
                            "size_bytes": int(row["size_bytes"]), "time_us": float(half["time_us"]),
                            "busbw_gbps": float(half["busbw_gbps"]), "algbw_gbps": float(half["algbw_gbps"])})
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("%s:%d: a result row lacks %s" % (path, n, e)) from None
    if not out:
        raise InputError("%s: no result rows; run gpubridge-perf with -J FILE" % ", ".join(paths))
    return out


def write_csv(rows, path):
    _perf_json.write_csv(rows, path, CSV_FIELDS)


def draw(rows, path, title, size_label):
    """Writes the PNG; returns False when matplotlib is not installed."""
    plt = _perf_json.pyplot()
    if plt is None:
        return False
    panels = {}
    for r in rows:
        panels.setdefault((r["collective"], r["type"], r["redop"]), {}).setdefault(
            (r["run"], r["library"], r["form"]), []).append(r)
    runs = {r["run"] for r in rows}
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.0, 4.6 * len(panels)), squeeze=False)
    for ax, ((coll, dtype, op), lines) in zip(axes[:, 0], panels.items()):
        sizes = sorted({r["size_bytes"] for ls in lines.values() for r in ls})
        for (run, library, form), ls in lines.items():
            ls.sort(key=lambda r: r["size_bytes"])
            label = "%s%s %s" % (run + ": " if len(runs) > 1 else "", library, form.replace("_", "-"))
            ax.plot([r["size_bytes"] for r in ls], [r["busbw_gbps"] for r in ls], marker="o", markersize=3,
                    linestyle="-" if library == "gpubridge" else "--", label=label)
        ax.set_xscale("log", base=2)
        ticks = sizes[::max(1, len(sizes) // 10)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(s) for s in ticks])
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title("%s %s%s: busbw against size" % (coll, dtype, "" if op == "none" else " " + op))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
