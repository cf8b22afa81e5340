"""Runs gpubridge-perf and reads its -J file: the shared piece of the bench/
comparisons. A series is {size_bytes: {"time_us", "algbw_gbps", "busbw_gbps"}}
for one column (out of place or in place) of the table."""
import json
import os
import subprocess
import tempfile


def size_arg(text):
    """'64M' -> 67108864 (1024-based K/M/G, as gpubridge-perf; '64MB' and
    '1.5G' too)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    return int(float(t[:-1]) * units[t[-1]]) if t[-1] in units else int(t)


def sizes(lo, hi, factor=2):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def read_json(path):
    """(meta, rows) of a gpubridge-perf -J file."""
    meta, rows = {}, []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            if "meta" in obj:
                meta = obj["meta"]
            else:
                rows.append(obj)
    return meta, rows


def series(rows, column="in_place"):
    out = {}
    for r in rows:
        half = r.get(column)
        if half is None:
            continue
        if half.get("wrong") not in (0, None):
            raise SystemExit("gpubridge-perf reported %s wrong elements at %d B" % (half["wrong"], r["size_bytes"]))
        out[r["size_bytes"]] = {k: half[k] for k in ("time_us", "algbw_gbps", "busbw_gbps")}
    return out


def perf_args(coll, lo, hi, factor, iters, warmup, check=1):
    return [coll, "-b", str(lo), "-e", str(hi), "-f", str(factor), "-n", str(iters), "-w", str(warmup),
            "-c", str(check)]


def run_local(build, nranks, vendors, args, env=None, timeout=600):
    """gpubridge-run -n nranks --vendors vendors -- gpubridge-perf args -J tmp.
    Returns (meta, rows, stdout)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "perf.json")
        cmd = [os.path.join(build, "bin", "gpubridge-run"), "-n", str(nranks), "--vendors", vendors, "--",
               os.path.join(build, "bin", "gpubridge-perf")] + args + ["-J", path]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise SystemExit("gpubridge-perf failed (exit %d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout,
                                                                           p.stderr))
        meta, rows = read_json(path)
        return meta, rows, p.stdout
