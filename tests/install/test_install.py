#!/usr/bin/env python3
"""`cmake --install` of this build into a temporary prefix, then an outside C
program (examples/c/allreduce.c: a 3-rank, two-island all-reduce with checked
sums) built against the installed tree by pkg-config and by find_package, and
against the source tree by add_subdirectory; each runs under the installed
gpubridge-run. The installed files must not lean on the build tree. The
installed man pages and bash completions list every option of each installed
tool's --help (man renders them), and share/doc/gpubridge holds README.md,
LICENSE, CHANGELOG.md and docs/*.md (tooldocs.py)."""
import glob
import os
import re
import shutil
import time

import installtest as it
import tooldocs

CONSUMER = os.path.join(it.SOURCE_DIR, "examples", "c")
RANKS = 3
VENDORS = "nvidia:2,amd:1"


def runpath(binary):
    out = it.run(["readelf", "-d", binary], "readelf -d " + binary, 30)
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", out)
    return m.group(1) if m else ""


def check_tree(prefix, libdir):
    ver = it.version()
    major = ver.split(".")[0]
    lib = os.path.join(prefix, libdir)
    want = [os.path.join(lib, "libgpubridge.so." + ver), os.path.join(lib, "libgpubridge-nccl.so"),
            os.path.join(prefix, "include", "gpubridge", "gpubridge.h"),
            os.path.join(prefix, "include", "gpubridge", "version.h"),
            os.path.join(lib, "pkgconfig", "gpubridge.pc"),
            os.path.join(lib, "cmake", "gpubridge", "gpubridgeConfig.cmake"),
            os.path.join(lib, "cmake", "gpubridge", "gpubridgeConfigVersion.cmake"),
            os.path.join(lib, "cmake", "gpubridge", "gpubridgeTargets.cmake")]
    want += [os.path.join(prefix, "bin", "gpubridge-" + t) for t in ("run", "perf", "info")]
    missing = [p for p in want if not os.path.isfile(p)]
    if missing:
        it.fail("not installed: " + ", ".join(missing))
    for link, target in (("libgpubridge.so." + major, "libgpubridge.so." + ver),
                         ("libgpubridge.so", "libgpubridge.so." + major)):
        path = os.path.join(lib, link)
        if not os.path.islink(path) or os.readlink(path) != target:
            it.fail("%s should be a link to %s" % (path, target))
    with open(os.path.join(prefix, "include", "gpubridge", "version.h"), encoding="utf-8") as f:
        if '#define GB_VERSION_STRING "%s"' % ver not in f.read():
            it.fail("the installed gpubridge/version.h does not say %s (the file VERSION)" % ver)
    # Installed programs find the installed library, never the build tree's.
    build = os.path.realpath(it.BUILD_DIR)
    for binary in glob.glob(os.path.join(prefix, "bin", "gpubridge-*")) + [os.path.join(lib, "libgpubridge-nccl.so")]:
        rp = runpath(binary)
        if "$ORIGIN" not in rp or build in rp:
            it.fail("%s has run path '%s': want one relative to $ORIGIN, none into %s" % (binary, rp, build))
    printed = it.run([os.path.join(prefix, "bin", "gpubridge-info"), "--version"], "installed gpubridge-info", 60)
    if printed.strip() != ver:
        it.fail("installed gpubridge-info --version printed %r, the file VERSION says %s" % (printed, ver))
    print("ok: installed tree complete, links and run paths right, gpubridge-info --version = %s" % ver, flush=True)
    tooldocs.check_docs(os.path.join(prefix, "share", "doc", "gpubridge"))
    tooldocs.check_tools(os.path.join(prefix, "bin"), prefix)


def run_job(prefix, program, how):
    cmd = [os.path.join(prefix, "bin", "gpubridge-run"), "-n", str(RANKS), "--vendors", VENDORS, "--port",
           str(it.free_port()), "--timeout", "90", "--", program]
    out = it.run(cmd, "the %s-built program under gpubridge-run" % how, 120)
    line = r"ok: rank (\d+) of %d, version %s" % (RANKS, re.escape(it.version()))
    oks = sorted(int(m) for m in re.findall(line, out))
    if oks != list(range(RANKS)):
        it.fail("the %s-built program: ranks reporting ok: %s, want 0..%d\n%s" % (how, oks, RANKS - 1, out[-3000:]))
    print("ok: %s: %d-rank all-reduce over %s correct on every rank" % (how, RANKS, VENDORS), flush=True)


def with_pkg_config(prefix, libdir, work):
    if not shutil.which("pkg-config"):
        it.fail("pkg-config is not installed, so gpubridge.pc cannot be checked: install it "
                "(Debian/Ubuntu: apt-get install pkg-config)")
    env = it.clean_env(PKG_CONFIG_PATH=os.path.join(prefix, libdir, "pkgconfig"))
    ver = it.run(["pkg-config", "--modversion", "gpubridge"], "pkg-config --modversion", 30, env).strip()
    if ver != it.version():
        it.fail("pkg-config says version %s, the file VERSION %s" % (ver, it.version()))
    flags = it.run(["pkg-config", "--cflags", "--libs", "gpubridge"], "pkg-config --cflags --libs", 30, env).split()
    real = os.path.realpath(prefix)
    for f in flags:
        if f.startswith(("-I", "-L")) and not os.path.realpath(f[2:]).startswith(real):
            it.fail("pkg-config flag %s points outside the install prefix %s" % (f, prefix))
    exe = os.path.join(work, "allreduce-pkg-config")
    it.run([it.CC, "-std=c11", "-Wall", "-Werror", os.path.join(CONSUMER, "allreduce.c"), "-o", exe] + flags +
           ["-Wl,-rpath," + os.path.join(prefix, libdir)], "cc with pkg-config's flags", 120, env)
    run_job(prefix, exe, "pkg-config")


def with_cmake(prefix, work, how, extra):
    build = os.path.join(work, "consumer-" + how)
    t0 = time.time()
    it.run([it.CMAKE, "-S", CONSUMER, "-B", build] + extra, "configure the outside project (%s)" % how, 120)
    it.run([it.CMAKE, "--build", build, "--target", "allreduce", "-j", "2"],
           "build the outside project (%s)" % how, 300)
    print("ok: %s: configured and built in %.1f s" % (how, time.time() - t0), flush=True)
    return build


def main():
    if not os.path.isfile(os.path.join(it.BUILD_DIR, "lib", "libgpubridge.so")):
        it.fail("%s/lib/libgpubridge.so is not built (build first: cmake --build %s)" % (it.BUILD_DIR, it.BUILD_DIR))
    libdir = it.cmake_cache("CMAKE_INSTALL_LIBDIR") or "lib"
    with it.TempDir("gb-install-") as work:
        prefix = os.path.join(work, "prefix")
        it.run([it.CMAKE, "--install", it.BUILD_DIR, "--prefix", prefix], "cmake --install", 120)
        check_tree(prefix, libdir)
        with_pkg_config(prefix, libdir, work)

        build = with_cmake(prefix, work, "find_package",
                           ["-DCMAKE_PREFIX_PATH=" + prefix, "-DGB_EXPECT_VERSION=" + it.version()])
        exe = os.path.join(build, "allreduce")
        if not runpath(exe).startswith(os.path.join(prefix, libdir)):
            it.fail("the find_package-built program's run path is %r, not the installed %s" % (runpath(exe), libdir))
        run_job(prefix, exe, "find_package")

        # Inside another project: no tests configured, the library built from source.
        build = with_cmake(prefix, work, "add_subdirectory",
                           ["-DGPUBRIDGE_SOURCE_DIR=" + it.SOURCE_DIR, "-DCMAKE_BUILD_TYPE=Debug"])
        if os.path.exists(os.path.join(build, "gpubridge", "tests")):
            it.fail("add_subdirectory configured gpubridge's tests; they are for a top-level build only")
        run_job(prefix, os.path.join(build, "allreduce"), "add_subdirectory")
    if os.path.exists(work):
        it.fail("the temporary folder %s was left behind" % work)
    print("6 passed, 0 failed")


if __name__ == "__main__":
    main()
