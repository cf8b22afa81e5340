#!/usr/bin/env python3
"""libgpubridge.so exports exactly the functions include/gpubridge/*.h
declares (read from the header text, not from the build), each declared
GB_API; libgpubridge-nccl.so exports only NCCL's names (nccl*, pnccl*)."""
import glob
import os
import re
import shutil

import installtest as it

NCCL_NAME = re.compile(r"^p?nccl[A-Z]\w*$")


def header_functions():
    """{name: declared with GB_API} over every public header, comments and preprocessor lines removed."""
    found = {}
    headers = sorted(glob.glob(os.path.join(it.SOURCE_DIR, "include", "gpubridge", "*.h")))
    if not headers:
        it.fail("no header in %s/include/gpubridge" % it.SOURCE_DIR)
    for path in headers:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r"\\\n", " ", text)
        text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
        text = re.sub(r'extern\s+"C"\s*\{|^\s*\}\s*$', " ", text, flags=re.M)
        while re.search(r"\{[^{}]*\}", text):
            text = re.sub(r"\{[^{}]*\}", " ", text)  # struct and enum bodies
        # A declaration: return type words and stars, a name, a parameter list.
        for statement in text.split(";"):
            m = re.fullmatch(r"\s*((?:[A-Za-z_]\w*[\s\*]+)+?)([A-Za-z_]\w*)\s*\(([^()]*)\)\s*", statement)
            if m:
                found[m.group(2)] = "GB_API" in m.group(1).split()
    return found


def exported(lib):
    if not shutil.which("nm"):
        it.fail("nm is not installed (binutils): it lists the exported symbols")
    out = it.run(["nm", "-D", "--defined-only", lib], "nm -D " + lib, 60)
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2].split("@")[0])
    return names


def main():
    lib = os.path.join(it.BUILD_DIR, "lib", "libgpubridge.so")
    drop_in = os.path.join(it.BUILD_DIR, "lib", "libgpubridge-nccl.so")
    for path in (lib, drop_in):
        if not os.path.isfile(path):
            it.fail("%s is not built (build first: cmake --build %s)" % (path, it.BUILD_DIR))
    declared = header_functions()
    if len(declared) < 30 or "gbAllReduce" not in declared:
        it.fail("parsed %d functions from the header, gbAllReduce %s: the parser is wrong"
                % (len(declared), "among them" if "gbAllReduce" in declared else "missing"))
    passed = 0
    problems = ["%s is declared without GB_API, so the library does not export it" % name
                for name, api in sorted(declared.items()) if not api]
    names = exported(lib)
    problems += ["libgpubridge.so exports %s, which no public header declares (an internal function "
                 "that lost its hidden visibility)" % s for s in sorted(names - set(declared))]
    problems += ["libgpubridge.so does not export %s, which the header declares" % s
                 for s in sorted(set(declared) - names)]
    if not problems:
        passed += 1
        print("ok: libgpubridge.so exports exactly the %d functions of the header" % len(names), flush=True)

    nccl = exported(drop_in)
    stray = sorted(s for s in nccl if not NCCL_NAME.match(s))
    problems += ["libgpubridge-nccl.so exports %s, not an NCCL name (nccl*, pnccl*)" % s for s in stray]
    for need in ("ncclAllReduce", "pncclAllReduce", "ncclCommInitRank", "ncclGetVersion"):
        if need not in nccl:
            problems.append("libgpubridge-nccl.so does not export %s" % need)
    if not stray:
        passed += 1
        print("ok: libgpubridge-nccl.so exports only NCCL's names (%d)" % len(nccl), flush=True)
    for p in problems:
        print("FAIL: " + p)
    print("%d passed, %d failed" % (passed, len(problems)))
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
