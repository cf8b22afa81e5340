#!/usr/bin/env python3
"""Embeds the reduction kernels (reduce.cu) in reduce_embedded.c, so the build
needs no CUDA or HIP compiler: the PTX nvcc makes of it, which the CUDA driver
compiles for the GPU at run time, and the source itself, which hiprtc compiles
on AMD GPUs.

  python3 embed.py [--nvcc PATH] [--out DIR]      (make -C src/device/gpu/kernels)

The PTX targets compute_75, the oldest architecture nvcc 13 emits, which a
CUDA 13 driver compiles for every newer GPU (sm_90 included). -fmad=false: no
multiply-add contraction; -ftz=false, -prec-div=true: subnormals kept, IEEE
division; the kernels must give base/dtype.c's bits. The PTX does not depend
on where the checkout lives, so the output is the same on every machine with
the same nvcc (tests/house/test_kernels_embedded.py checks it).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = "reduce.cu"
OUTPUT = "reduce_embedded.c"
ARCH = "compute_75"
NVCC_FLAGS = ["-ptx", "-arch=" + ARCH, "-fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true"]
WIDTH = 4000  # characters of string per line of C: reduce_embedded.c stays under the 800-line limit
NAMES = ("gbGpuKernelsPtx", "gbGpuKernelsSource", "gbGpuKernelsCompiler")


def nvcc_release(nvcc):
    """'13.0.88' from nvcc --version ('... release 13.0, V13.0.88')."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release \S+, V(\S+)", out)
    if not m:
        raise RuntimeError("cannot read the release from `%s --version`:\n%s" % (nvcc, out))
    return m.group(1)


def make_ptx(nvcc, source_dir):
    """The PTX of source_dir/reduce.cu. nvcc runs in source_dir on the bare file name."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "reduce.ptx")
        p = subprocess.run([nvcc] + NVCC_FLAGS + ["-o", out, SOURCE], cwd=source_dir, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("nvcc failed (exit %d):\n%s%s" % (p.returncode, p.stdout, p.stderr))
        with open(out, encoding="ascii") as f:
            return f.read()


def escape(text):
    """text as C string-literal pieces, one per character (never split inside an escape)."""
    table = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "?": "\\?"}  # \? : no trigraphs under -std=c11
    out = []
    for c in text:
        if c in table:
            out.append(table[c])
        elif " " <= c <= "~":
            out.append(c)
        else:
            raise ValueError("character %r cannot be embedded" % c)
    return out


def literal_lines(text):
    pieces, lines, cur, n = escape(text), [], [], 0
    for p in pieces:
        if n + len(p) > WIDTH:
            lines.append("".join(cur))
            cur, n = [], 0
        cur.append(p)
        n += len(p)
        if p == "\\n" and n > WIDTH * 3 // 4:  # prefer ending a line of C at the end of a line of text
            lines.append("".join(cur))
            cur, n = [], 0
    if cur:
        lines.append("".join(cur))
    return ['    "%s"' % l for l in lines]


def render(ptx, source, compiler):
    """The text of reduce_embedded.c."""
    out = [
        "/* The reduction kernels (reduce.cu), embedded: made by embed.py; edit",
        " * reduce.cu and run `make -C src/device/gpu/kernels`, never this file.",
        " *  - gbGpuKernelsPtx: the PTX, for the CUDA driver (cuModuleLoadData);",
        " *  - gbGpuKernelsSource: reduce.cu, for hiprtc on AMD GPUs;",
        " *  - gbGpuKernelsCompiler: what made the PTX. */",
        '#include "device/gpu/kernels/kernels.h"',
        "",
    ]
    for name, text in zip(NAMES, (ptx, source, compiler)):
        out.append("const char %s[] =" % name)
        out.extend(literal_lines(text))
        out[-1] += ";"
        out.append("")
    return "\n".join(out)


def read_embedded(path):
    """{name: text} from a reduce_embedded.c (the inverse of render)."""
    unescape = {"\\\\": "\\", '\\"': '"', "\\n": "\n", "\\t": "\t", "\\?": "?"}
    found, name = {}, None
    with open(path, encoding="ascii") as f:
        for line in f:
            m = re.match(r"^const char (\w+)\[\] =$", line.rstrip("\n"))
            if m:
                name = m.group(1)
                found[name] = ""
                continue
            m = re.match(r'^    "(.*)";?$', line.rstrip("\n"))
            if m and name:
                found[name] += re.sub(r'\\[\\"nt?]', lambda e: unescape[e.group(0)], m.group(1))
    return found


def compiler_line(release):
    return "nvcc %s %s" % (release, " ".join(NVCC_FLAGS))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"), help="the nvcc to run (default: nvcc)")
    ap.add_argument("--out", default=HERE, help="folder to write %s into (default: next to this script)" % OUTPUT)
    args = ap.parse_args()
    try:
        release = nvcc_release(args.nvcc)
        ptx = make_ptx(args.nvcc, HERE)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        sys.exit("embed.py: %s (give nvcc's path with --nvcc)" % e)
    with open(os.path.join(HERE, SOURCE), encoding="ascii") as f:
        source = f.read()
    path = os.path.join(args.out, OUTPUT)
    with open(path, "w", encoding="ascii") as f:
        f.write(render(ptx, source, compiler_line(release)))
    print("wrote %s: %d bytes of PTX (%s), %d of source" % (path, len(ptx), compiler_line(release), len(source)))


if __name__ == "__main__":
    main()
