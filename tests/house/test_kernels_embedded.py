#!/usr/bin/env python3
"""src/device/gpu/kernels/reduce_embedded.c is what embed.py makes of reduce.cu
(`make -C src/device/gpu/kernels`): its source is reduce.cu as it is, its text
is embed.py's rendering, its compiler line has embed.py's flags, and with an
nvcc of the release it records, the file regenerated into a temporary folder
is identical byte for byte. Without nvcc (or with another release) that last
check cannot run: it is listed as skipped and the others still must pass.
The PTX holds the 56 kernels device/gpu/reduce.c looks up, each with the block
size reduce.c launches, and nothing that changes bits: no flush to zero, no
fused or approximate float arithmetic. The constants reduce.c shares with
reduce.cu and device.h agree."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KERNELS = os.path.join(SOURCE, "src", "device", "gpu", "kernels")
sys.path.insert(0, KERNELS)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import embed  # noqa: E402  (src/device/gpu/kernels/embed.py)

problems = []


def read(*parts):
    with open(os.path.join(SOURCE, *parts), encoding="ascii") as f:
        return f.read()


def define(text, name, where):
    m = re.search(r"^#define %s (\S+)" % name, text, re.M)
    if not m:
        problems.append("%s has no #define %s" % (where, name))
        return None
    return m.group(1)


committed_path = os.path.join(KERNELS, embed.OUTPUT)
committed = read("src", "device", "gpu", "kernels", embed.OUTPUT)
cu = read("src", "device", "gpu", "kernels", embed.SOURCE)
found = embed.read_embedded(committed_path)
missing = [n for n in embed.NAMES if n not in found]
if missing:
    print("FAIL %s lacks %s: run `make -C src/device/gpu/kernels`" % (embed.OUTPUT, ", ".join(missing)))
    sys.exit(1)
ptx, source, compiler = (found[n] for n in embed.NAMES)

# 1. The file as embed.py renders it, the source as it is, embed.py's flags.
if source != cu:
    problems.append("the source in %s is not %s: run `make -C src/device/gpu/kernels`" % (embed.OUTPUT, embed.SOURCE))
if embed.render(ptx, source, compiler) != committed:
    problems.append("%s is not embed.py's rendering (edited by hand?): run `make -C src/device/gpu/kernels`"
                    % embed.OUTPUT)
m = re.match(r"nvcc (\S+) ", compiler)
recorded = m.group(1) if m else None
if recorded is None or compiler != embed.compiler_line(recorded):
    problems.append("the PTX was made with %r, not with embed.py's flags (%s): run `make -C src/device/gpu/kernels`"
                    % (compiler, " ".join(embed.NVCC_FLAGS)))

# 2. Regenerated with the same nvcc: byte for byte.
nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
if nvcc is None:
    print("SKIP regeneration of %s: no nvcc on PATH (the committed PTX is from nvcc %s)" % (embed.OUTPUT, recorded))
else:
    release = embed.nvcc_release(nvcc)
    if release != recorded:
        print("SKIP regeneration of %s: this nvcc is %s, the committed PTX is from %s" % (embed.OUTPUT, release,
                                                                                         recorded))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([sys.executable, os.path.join(KERNELS, "embed.py"), "--nvcc", nvcc, "--out", tmp],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                problems.append("embed.py failed (exit %d): %s%s" % (p.returncode, p.stdout, p.stderr))
            else:
                with open(os.path.join(tmp, embed.OUTPUT), encoding="ascii") as f:
                    fresh = f.read()
                if fresh != committed:
                    problems.append("%s differs from what embed.py makes of %s with nvcc %s: run `make -C "
                                    "src/device/gpu/kernels` and commit the result" % (embed.OUTPUT, embed.SOURCE,
                                                                                      release))
                else:
                    print("regenerated with nvcc %s: identical (%d bytes of PTX)" % (release, len(ptx)))

# 3. The PTX: the kernels reduce.c looks up, its block size, no bit-changing arithmetic.
reduce_c = read("src", "device", "gpu", "reduce.c")
device_h = read("src", "device", "device.h")
types = re.search(r"typeNames\[gbNumTypes\] = \{([^}]*)\}", reduce_c)
ops = re.search(r"opNames\[4\] = \{([^}]*)\}", reduce_c)
if not types or not ops:
    problems.append("src/device/gpu/reduce.c: typeNames or opNames not found")
else:
    want = {"gb_reduce_%s_%s" % (t, o) for t in re.findall(r'"(\w+)"', types.group(1))
            for o in re.findall(r'"(\w+)"', ops.group(1))}
    # The wire formats' encoders and folds (base/wire.h): bf16 of f32, fp8 of f32, f16, bf16.
    want |= {"gb_%s_%s" % (k, w) for k in ("encode", "fold") for w in ("bf16_f32", "fp8_f32", "fp8_f16", "fp8_bf16")}
    entries = re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)
    if len(want) != 56 or set(entries) != want or len(entries) != 56:
        problems.append("the PTX's kernels %s are not the 56 reduce.c looks up %s"
                        % (sorted(set(entries) ^ want) or len(entries), sorted(want)[:3]))
threads = define(reduce_c, "THREADS", "reduce.c")
if ptx.count(".maxntid %s, 1, 1" % threads) != 56:
    problems.append("not every kernel's PTX has .maxntid %s (reduce.c's THREADS)" % threads)
if ".target sm_75" not in ptx:
    problems.append("the PTX does not target sm_75 (compute_75)")
for bad, why in ((r"\.ftz\b", "flushes subnormals"), (r"\bfma\.rn\.f|\bmad\.(rn\.)?f", "fuses multiply-add"),
                 (r"\bdiv\.(approx|full)\.", "divides approximately"),
                 (r"\b(ex2|lg2|rcp|sqrt)\.approx", "approximates")):
    if re.search(bad, ptx):
        problems.append("the PTX %s (%s): reduce.cu must give base/dtype.c's bits" % (why, bad))

# 4. Constants shared by reduce.cu, reduce.c and device.h.
for cu_name, c_name in (("GB_REDUCE_THREADS", "THREADS"), ("GB_REDUCE_UNROLL", "UNROLL"),
                        ("GB_NAN_SIGNALING_FIRST", "NAN_SIGNALING_FIRST"),
                        ("GB_NAN_DEFAULT_POSITIVE", "NAN_DEFAULT_POSITIVE")):
    a, b = define(cu, cu_name, "reduce.cu"), define(reduce_c, c_name, "reduce.c")
    if a != b:
        problems.append("reduce.cu's %s is %s but reduce.c's %s is %s" % (cu_name, a, c_name, b))
if define(cu, "GB_REDUCE_MAX_SRCS", "reduce.cu") != define(device_h, "GB_REDUCE_MAX_SRCS", "device.h"):
    problems.append("GB_REDUCE_MAX_SRCS differs between reduce.cu and device/device.h")

for p in problems:
    print("FAIL", p)
print("%s: %d bytes of PTX (%s), %d of source; %d problem%s" % (embed.OUTPUT, len(ptx), compiler, len(source),
                                                              len(problems), "" if len(problems) == 1 else "s"))
sys.exit(1 if problems else 0)
