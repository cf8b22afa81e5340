"""Turns measured series into what a bench prints and keeps: the best of
repeated runs, the markdown table, the results file and the last line
`algbw_ratio_64MiB <x> latency_ratio_8B <y>` (gpubridge over the baseline)."""
import json
import os
import platform

MIB64 = 64 << 20


def best(runs, factor):
    """Per size, the run with the least time (the machine's other load only
    ever adds time); algbw and busbw recomputed from it."""
    out = {}
    for s in runs:
        for size, v in s.items():
            if size not in out or v["time_us"] < out[size]["time_us"]:
                out[size] = dict(v)
    for size, v in out.items():
        v["algbw_gbps"] = size / (v["time_us"] * 1e-6) / 1e9
        v["busbw_gbps"] = v["algbw_gbps"] * factor
    return out


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def ratios(gb, base):
    if MIB64 not in gb or MIB64 not in base or 8 not in gb or 8 not in base:
        raise SystemExit("the ratios need 8 B and 64 MiB in both series (run with -b 8 -e 64M)")
    algbw = gb[MIB64]["algbw_gbps"] / base[MIB64]["algbw_gbps"]
    latency = gb[8]["time_us"] / base[8]["time_us"]
    return algbw, latency


def markdown(names, series_list):
    """One row a size: time and busbw of each series."""
    head = "| size | " + " | ".join("%s time (us) | %s busbw (GB/s)" % (n, n) for n in names) + " |"
    rule = "|" + "---|" * (1 + 2 * len(names))
    lines = [head, rule]
    for size in sorted(series_list[0]):
        cells = []
        for s in series_list:
            v = s.get(size)
            cells += ["%.1f" % v["time_us"], "%.3f" % v["busbw_gbps"]] if v else ["-", "-"]
        lines.append("| %s | %s |" % (human(size), " | ".join(cells)))
    return "\n".join(lines)


def save(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def final_line(gb, base):
    algbw, latency = ratios(gb, base)
    return "algbw_ratio_64MiB %.3f latency_ratio_8B %.3f" % (algbw, latency)


def machine():
    """What the numbers ran on, with the load of the moment (others' jobs on a
    shared machine show there)."""
    return {"cpus": os.cpu_count(), "loadavg_1_5_15": os.getloadavg(), "kernel": platform.release(),
            "host": platform.node()}
