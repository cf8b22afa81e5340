#!/usr/bin/env python3
"""gpubridge's nccl.h (include/gpubridge/nccl/nccl.h), the header a program
written for NCCL builds against where no NCCL is installed: it compiles as
C11 and C++ with every warning an error; it declares exactly the nccl*
functions libgpubridge-nccl.so exports (so the two cannot drift); its
types have NCCL's sizes and values; and examples/c/nccl_allreduce.c, built
against it and the drop-in, all-reduces on a simulated two-island job under
gpubridge-run, rank 0 removing its id file."""
import os
import re
import shutil
import subprocess

import installtest as it

HEADER_DIR = os.path.join(it.SOURCE_DIR, "include", "gpubridge", "nccl")
LIB = os.path.join(it.BUILD_DIR, "lib")
RANKS = 3

# NCCL's documented values: a program built against NVIDIA's nccl.h passes these.
CHECKS = r"""
#include <nccl.h>
#include <stddef.h>
#include <stdio.h>
#define CHECK(c) do { if (!(c)) { printf("FAIL %s\n", #c); bad = 1; } } while (0)
int main(void) {
  int bad = 0;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  CHECK(sizeof(ncclUniqueId) == 128);
  CHECK(sizeof(ncclConfig_t) == 80);
  CHECK(offsetof(ncclConfig_t, splitShare) == 40);
  CHECK(offsetof(ncclConfig_t, commName) == 48);
  CHECK(offsetof(ncclConfig_t, nvlinkCentricSched) == 76);
  CHECK(config.size == 80 && config.magic == 0xcafebeef && config.version == 22800);
  CHECK(config.blocking == NCCL_CONFIG_UNDEF_INT && config.netName == NULL && config.commName == NULL);
  CHECK(NCCL_VERSION_CODE == 22800 && NCCL_VERSION(2, 8, 4) == 2804);
  CHECK(ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12);
  CHECK(ncclAvg == 4 && ncclNumOps == 5 && ncclInProgress == 7 && ncclRemoteError == 6);
  CHECK(NCCL_SPLIT_NOCOLOR == -1);
  /* NCCL's other type names, as NCCL's own examples use them */
  CHECK(ncclChar == ncclInt8 && ncclInt == ncclInt32 && ncclHalf == ncclFloat16 && ncclFloat == ncclFloat32 &&
        ncclDouble == ncclFloat64 && ncclNumResults == 8);
  CHECK(NCCL_CONFIG_UNDEF_PTR == NULL && NCCL_CTA_POLICY_EFFICIENCY == 1 && NCCL_SHRINK_ABORT == 1);
  if (!bad) printf("values ok\n");
  return bad;
}
"""


def declared(header):
    with open(header, encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r"\b(nccl[A-Za-z0-9]+)\(", text))


def exported(lib):
    out = it.run(["nm", "-D", "--defined-only", lib], "nm -D " + lib, 60)
    return {m for m in re.findall(r"\s[TW]\s+(nccl\w+)$", out, re.M)}


def main():
    header = os.path.join(HEADER_DIR, "nccl.h")
    drop_in = os.path.join(LIB, "libgpubridge-nccl.so")
    decl, exp = declared(header), exported(drop_in)
    if decl != exp:
        it.fail("nccl.h and libgpubridge-nccl.so differ: declared only %s; exported only %s"
                % (sorted(decl - exp), sorted(exp - decl)))
    print("ok: nccl.h declares the %d nccl* functions the drop-in exports, no more, no fewer" % len(decl), flush=True)

    includes = ["-I" + HEADER_DIR, "-I" + os.path.join(it.SOURCE_DIR, "include"),
                "-I" + os.path.join(it.BUILD_DIR, "include")]
    with it.TempDir("gb-nccl-h-") as tmp:
        src = os.path.join(tmp, "checks.c")
        with open(src, "w", encoding="utf-8") as f:
            f.write(CHECKS)
        it.run([it.CC, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", *includes, src, "-o",
                os.path.join(tmp, "checks")], "the checks in C11", 120)
        out = it.run([os.path.join(tmp, "checks")], "the header's values", 30)
        if "values ok" not in out:
            it.fail("nccl.h's values: " + out)
        cxx = shutil.which("c++") or shutil.which("g++")
        if cxx:
            cpp = os.path.join(tmp, "checks.cpp")
            shutil.copy(src, cpp)
            it.run([cxx, "-std=c++11", "-Wall", "-Wextra", "-Werror", *includes, cpp, "-o",
                    os.path.join(tmp, "checks_cpp")], "the checks in C++", 120)
            print("ok: nccl.h compiles as C11 and C++ without a warning; NCCL's sizes, offsets and values", flush=True)
        else:
            print("ok: nccl.h compiles as C11 without a warning; NCCL's sizes, offsets and values "
                  "(SKIP: no C++ compiler for the C++ check)", flush=True)

        program = os.path.join(tmp, "nccl_allreduce")
        it.run([it.CC, "-std=c11", "-Wall", "-Wextra", "-Werror", *includes,
                os.path.join(it.SOURCE_DIR, "examples", "c", "nccl_allreduce.c"), "-L" + LIB,
                "-lgpubridge-nccl", "-lgpubridge", "-Wl,-rpath," + LIB, "-o", program],
               "building examples/c/nccl_allreduce.c", 120)
        id_file = os.path.join(tmp, "nccl-id")
        out = it.run([os.path.join(it.BUILD_DIR, "bin", "gpubridge-run"), "-n", str(RANKS), "--vendors",
                      "nvidia:2,amd:1", "--timeout", "60", "--", program, id_file],
                     "nccl_allreduce under gpubridge-run", 120, env=it.clean_env(GPUBRIDGE_SOCKET_IFNAME="lo"))
        oks = sorted(int(r) for r in re.findall(r"ok: rank (\d+) of %d over NCCL's API" % RANKS, out))
        if oks != list(range(RANKS)):
            it.fail("nccl_allreduce: want an ok line from each of %d ranks, got %s:\n%s" % (RANKS, oks, out))
        left = [f for f in os.listdir(tmp) if f.startswith("nccl-id")]
        if left:
            it.fail("nccl_allreduce left its id file behind: %s" % left)
    print("ok: examples/c/nccl_allreduce.c, built against nccl.h and the drop-in, checked its sums on %d ranks "
          "of two islands" % RANKS, flush=True)
    print("PASS: nccl.h serves programs written for NCCL")


if __name__ == "__main__":
    main()
