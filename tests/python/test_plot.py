"""python -m gpubridge.plot on a synthetic gpubridge-perf --phases -J file
(no library, no torch needed): the CSV holds exactly the rows with phases of
the chosen form, with their values; the PNG is a PNG of a plausible size (with
matplotlib); without matplotlib (an import that fails) only the CSV is
written and the command says so; a file without phases, a broken line and a
missing file are refused with exit 1 and a message naming the file. With
--kind bandwidth: the CSV holds every size's busbw of gpubridge (out of place,
in place) and of the --baseline library, from two runs, and the PNG is drawn;
a file of metadata alone is refused."""
import csv
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

PHASES = ("check", "island", "wait", "bridge", "after")


def row(size, time_us, phases, in_phases=None):
    def half(t, ph):
        h = {"time_us": t, "algbw_gbps": 1.0, "busbw_gbps": 1.0, "wrong": 0}
        if ph is not None:
            h["phases"] = dict({"rank": 0, "records": 20}, **{p + "_us": v for p, v in zip(PHASES, ph)})
        return h
    return {"collective": "all_reduce", "size_bytes": size, "count": size // 4, "type": "float", "redop": "sum",
            "root": -1, "ranks": 4, "islands": 2, "policy": "auto", "mode": "simulated",
            "out_of_place": half(time_us, phases), "in_place": half(time_us * 2, in_phases)}


# size -> (out-of-place phases, in-place phases): made-up values, each phase distinct.
DATA = {
    1024: ((0.0, 5.5, 1.25, 10.0, 3.0), (0.0, 6.0, 1.5, 11.0, 3.5)),
    65536: ((2.0, 40.0, 3.0, 120.5, 30.0), (2.5, 41.0, 3.5, 121.0, 31.0)),
    4194304: ((2.0, 900.0, 4.0, 5000.0, 700.25), (2.0, 950.0, 4.5, 5100.0, 720.0)),
}


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def run(args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=gbtest.PACKAGE_DIR + os.pathsep + (env_extra or {}).get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "gpubridge.plot"] + args, capture_output=True, text=True, timeout=120,
                       env=env)
    return p.returncode, p.stdout + p.stderr


def bw_row(size, busbw, base_busbw=None):
    r = row(size, 10.0, None)
    r["out_of_place"]["busbw_gbps"], r["in_place"]["busbw_gbps"] = busbw, busbw / 2
    if base_busbw is not None:
        r["baseline"] = {"library": "NCCL 2.28.0", "out_of_place": dict(r["out_of_place"], busbw_gbps=base_busbw),
                         "in_place": None}
    return r


def check_bandwidth(tmp, check):
    runs = {"first": {1024: (0.5, 0.75), 1048576: (10.0, 12.5)}, "second": {1024: (0.25, None), 4096: (1.5, None)}}
    paths = []
    for name, sizes in runs.items():
        paths.append(os.path.join(tmp, name + ".json"))
        with open(paths[-1], "w") as f:
            f.write(json.dumps({"meta": {"tool": "gpubridge-perf"}}) + "\n")
            for size, (bw, base) in sizes.items():
                f.write(json.dumps(bw_row(size, bw, base)) + "\n")
    out = os.path.join(tmp, "busbw.png")
    rc, text = run(paths + ["--kind", "bandwidth", "-o", out])
    check(rc == 0, "bandwidth: exit %d: %s" % (rc, text))
    with open(os.path.join(tmp, "busbw.csv")) as f:
        got = sorted((r["run"], r["library"], r["form"], int(r["size_bytes"]), float(r["busbw_gbps"]))
                     for r in csv.DictReader(f))
    want = []
    for name, sizes in runs.items():
        for size, (bw, base) in sizes.items():
            want += [(name, "gpubridge", "out_of_place", size, bw), (name, "gpubridge", "in_place", size, bw / 2)]
            if base is not None:
                want.append((name, "NCCL 2.28.0", "out_of_place", size, base))
    check(got == sorted(want), "bandwidth CSV:\n  got  %s\n  want %s" % (got, sorted(want)))
    try:
        import matplotlib  # noqa: F401
        size = png_size(out)
        check(size is not None and size[0] >= 400 and size[1] >= 300, "bandwidth PNG: %s" % (size,))
    except ImportError:
        print("SKIP: the bandwidth PNG check needs matplotlib; the CSV was checked")
    meta = os.path.join(tmp, "meta.json")
    with open(meta, "w") as f:
        f.write(json.dumps({"meta": {"tool": "gpubridge-perf"}}) + "\n")
    rc, text = run([meta, "--kind", "bandwidth", "-o", os.path.join(tmp, "meta.png")])
    check(rc == 1 and "no result rows; run gpubridge-perf with -J FILE" in text, "metadata only: %d %r" % (rc, text))


def main():
    problems = []

    def check(cond, what):
        if not cond:
            problems.append(what)

    with tempfile.TemporaryDirectory(prefix="gbplot-") as tmp:
        src = os.path.join(tmp, "perf.json")
        with open(src, "w") as f:
            f.write(json.dumps({"meta": {"tool": "gpubridge-perf"}}) + "\n")
            for size, (op, ip) in DATA.items():
                f.write(json.dumps(row(size, sum(op) * 1.03, op, ip)) + "\n")
            f.write(json.dumps(row(8, 12.0, None)) + "\n")  # a row without phases: left out

        for form, pick in (("out_of_place", 0), ("in_place", 1)):
            out = os.path.join(tmp, form + ".png")
            rc, text = run([src, "-o", out, "--form", form])
            check(rc == 0, "%s: exit %d: %s" % (form, rc, text))
            csv_path = os.path.join(tmp, form + ".csv")
            with open(csv_path) as f:
                got = list(csv.DictReader(f))
            check([int(r["size_bytes"]) for r in got] == sorted(DATA), "%s: CSV sizes %s" % (
                form, [r["size_bytes"] for r in got]))
            for r in got:
                want = DATA[int(r["size_bytes"])][pick]
                have = tuple(float(r[p + "_us"]) for p in PHASES)
                time_us = sum(DATA[int(r["size_bytes"])][0]) * 1.03 * (2 if pick else 1)
                check(have == want and r["form"] == form and r["records"] == "20" and
                      abs(float(r["time_us"]) - time_us) < 1e-9 and r["collective"] == "all_reduce",
                      "%s: CSV row %s, want phases %s" % (form, r, want))
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                print("SKIP: the PNG check needs matplotlib (tests/requirements.txt); the CSV was checked")
                check("matplotlib is not installed" in text and not os.path.exists(out),
                      "%s without matplotlib: %s" % (form, text))
                continue
            size = png_size(out)
            check(size is not None and size[0] >= 400 and size[1] >= 300, "%s: %s is not a PNG of at least "
                  "400x300: %s" % (form, out, size))
            check("wrote %s and %s (3 rows)" % (out, csv_path) in text, "%s: message %r" % (form, text))

        # An import of matplotlib that fails: the CSV alone, and the command says so.
        fake = os.path.join(tmp, "no_matplotlib", "matplotlib")
        os.makedirs(fake)
        with open(os.path.join(fake, "__init__.py"), "w") as f:
            f.write("raise ImportError('matplotlib hidden by the test')\n")
        out = os.path.join(tmp, "nompl.png")
        rc, text = run([src, "-o", out], {"PYTHONPATH": os.path.dirname(fake)})
        check(rc == 0 and not os.path.exists(out) and os.path.exists(os.path.join(tmp, "nompl.csv")) and
              "matplotlib is not installed, so no picture: wrote %s only (3 rows)"
              % os.path.join(tmp, "nompl.csv") in text, "without matplotlib: exit %d, %r" % (rc, text))

        # Refused inputs.
        bare = os.path.join(tmp, "bare.json")
        with open(bare, "w") as f:
            f.write(json.dumps(row(8, 12.0, None)) + "\n")
        rc, text = run([bare, "-o", os.path.join(tmp, "bare.png")])
        check(rc == 1 and "no out_of_place rows with phases; run gpubridge-perf with --phases" in text
              and not os.path.exists(os.path.join(tmp, "bare.csv")), "no phases: exit %d, %r" % (rc, text))
        broken = os.path.join(tmp, "broken.json")
        with open(broken, "w") as f:
            f.write(json.dumps(row(8, 12.0, DATA[1024][0])) + "\n{oops\n")
        rc, text = run([broken, "-o", os.path.join(tmp, "broken.png")])
        check(rc == 1 and "%s:2: not a JSON line" % broken in text, "broken line: exit %d, %r" % (rc, text))
        rc, text = run([os.path.join(tmp, "missing.json")])
        check(rc == 1 and "missing.json: No such file" in text, "missing file: exit %d, %r" % (rc, text))

        check_bandwidth(tmp, check)

    if problems:
        gbtest.fail("; ".join(problems))
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
