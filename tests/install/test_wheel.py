#!/usr/bin/env python3
"""The wheel (`pip wheel .`): it carries the package, libgpubridge once
(under its SONAME), the drop-in libgpubridge-nccl.so, the C header, the three
tools and their console scripts, at the version of the file VERSION, and the
license (METADATA and .dist-info's LICENSE). Then,
installed into a temporary venv: gpubridge-info --version, the package's
version and paths, and gpubridge-run starting gpubridge-perf from there."""
import json
import os
import re
import subprocess
import sys
import time
import zipfile

import installtest as it

TOOLS = ("run", "perf", "info")


def check_wheel(path, ver):
    problems = []
    with zipfile.ZipFile(path) as z:
        infos = {i.filename: i for i in z.infolist()}
        names = set(infos)

        def text(name):
            return z.read(name).decode("utf-8", "replace") if name in names else ""
        want = ["gpubridge/__init__.py", "gpubridge/_lib.py", "gpubridge/_tools.py",
                "gpubridge/lib/libgpubridge.so.0", "gpubridge/lib/libgpubridge-nccl.so",
                "gpubridge/include/gpubridge/gpubridge.h", "gpubridge/include/gpubridge/version.h"]
        want += ["gpubridge/bin/gpubridge-" + t for t in TOOLS]
        problems += ["the wheel lacks " + n for n in want if n not in names]
        for t in TOOLS:
            info = infos.get("gpubridge/bin/gpubridge-" + t)
            if info and not (info.external_attr >> 16) & 0o100:
                problems.append("gpubridge/bin/gpubridge-%s is not executable in the wheel" % t)
        stray = sorted(n for n in names if re.search(r"libgpubridge\.so($|\.\d+\.)|/_cmake/|__pycache__", n))
        problems += ["the wheel carries %s (one library file, under its SONAME, and no build files)" % n
                     for n in stray]
        if '#define GB_VERSION_STRING "%s"' % ver not in text("gpubridge/include/gpubridge/version.h"):
            problems.append("the wheel's gpubridge/version.h does not say %s" % ver)
        dist = "gpubridge-%s.dist-info/" % ver
        meta = text(dist + "METADATA")
        if not re.search(r"^Version: %s$" % re.escape(ver), meta, re.M):
            problems.append("%sMETADATA does not say Version: %s" % (dist, ver))
        if not re.search(r"^License: BSD-3-Clause$", meta, re.M):
            problems.append("%sMETADATA does not say License: BSD-3-Clause" % dist)
        licenses = [n for n in names if n.startswith(dist) and n.endswith("/LICENSE")]
        if len(licenses) != 1 or "BSD 3-Clause License" not in text(licenses[0]):
            problems.append("%s carries %s; want the file LICENSE once" % (dist, licenses or "no LICENSE"))
        entry = text(dist + "entry_points.txt")
        for t in TOOLS:
            if not re.search(r"^gpubridge-%s\s*=\s*gpubridge\._tools:%s$" % (t, t), entry, re.M):
                problems.append("entry_points.txt has no console script gpubridge-%s = gpubridge._tools:%s:\n%s"
                                % (t, t, entry))
    if problems:
        it.fail("; ".join(problems))
    print("ok: the wheel holds the package, both libraries, the header, the three tools and their scripts, "
          "the license (%d files, version %s)" % (len(names), ver), flush=True)


def check_installed(venv, work, ver):
    bin_dir = os.path.join(venv, "bin")
    env = it.clean_env()
    printed = it.run([os.path.join(bin_dir, "gpubridge-info"), "--version"], "venv gpubridge-info --version", 60,
                     env, cwd=work).strip()
    if printed != ver:
        it.fail("gpubridge-info --version from the venv printed %r, the file VERSION says %s" % (printed, ver))
    print("ok: gpubridge-info --version from the venv: %s" % printed, flush=True)

    probe = ("import gpubridge, json; print(json.dumps([gpubridge.get_version(), gpubridge.__version__, "
             "gpubridge.get_version_code(), gpubridge.__file__, gpubridge.library_path(), gpubridge.drop_in_path(), "
             "gpubridge.include_dir()]))")
    out = it.run([os.path.join(bin_dir, "python"), "-c", probe], "import gpubridge in the venv", 120, env, cwd=work)
    got, dunder, code, init, lib, drop_in, include = json.loads(out.strip().splitlines()[-1])
    major, minor, patch = (int(x) for x in ver.split("."))
    package = os.path.dirname(init)
    problems = []
    if (got, dunder, code) != (ver, ver, major * 10000 + minor * 100 + patch):
        problems.append("get_version() %r, __version__ %r, get_version_code() %r for %s" % (got, dunder, code, ver))
    if not package.startswith(os.path.realpath(venv)) and not package.startswith(venv):
        problems.append("gpubridge was imported from %s, not from the venv %s" % (package, venv))
    if lib != os.path.join(package, "lib", "libgpubridge.so.0"):
        problems.append("library_path() %s, not the package's lib/libgpubridge.so.0" % lib)
    if drop_in != os.path.join(package, "lib", "libgpubridge-nccl.so"):
        problems.append("drop_in_path() %s, not the package's lib/libgpubridge-nccl.so" % drop_in)
    if include != os.path.join(package, "include"):
        problems.append("include_dir() %s, not the package's include" % include)
    # The drop-in resolves libgpubridge.so.0 to the package's copy (its rpath is $ORIGIN).
    ldd = it.run(["ldd", drop_in], "ldd the drop-in", 30, env)
    m = re.search(r"libgpubridge\.so\.0 => (\S+)", ldd)
    if not m or os.path.realpath(m.group(1)) != os.path.realpath(lib):
        problems.append("the drop-in finds libgpubridge.so.0 at %s, not %s" % (m.group(1) if m else "nowhere", lib))
    if problems:
        it.fail("; ".join(problems))
    print("ok: import gpubridge from the venv: version %s, code %d, library, drop-in and header in the package"
          % (got, code), flush=True)

    job = [os.path.join(bin_dir, "gpubridge-run"), "-n", "2", "--vendors", "nvidia,amd", "--port",
           str(it.free_port()), "--timeout", "90", "--", os.path.join(bin_dir, "gpubridge-perf"), "all_reduce",
           "-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-w", "1", "-c", "1"]
    out = it.run(job, "the venv's gpubridge-run with gpubridge-perf", 120, env, cwd=work)
    rows = re.findall(r"^\[0\]\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)",
                      out, re.M)
    if [int(r[0]) for r in rows] != [8, 64, 512, 4096] or any(r[1] != "0" or r[2] != "0" for r in rows) \
            or "Out of bounds values : 0 OK" not in out:
        it.fail("gpubridge-perf from the venv: rows %s\n%s" % (rows, out[-3000:]))
    print("ok: the venv's gpubridge-run ran its gpubridge-perf on 2 ranks: 4 sizes, 0 wrong", flush=True)


def require_tools():
    """What building and installing the wheel needs, or a failure that names it."""
    probe = subprocess.run([sys.executable, "-c", "import scikit_build_core, pip, venv, ensurepip"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        it.fail("%s cannot build and install the wheel: %s; install scikit-build-core (python3 -m pip install "
                "scikit-build-core: the test builds with --no-build-isolation) and, on Debian/Ubuntu, python3-venv"
                % (sys.executable, probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"))


def main():
    ver = it.version()
    require_tools()
    with it.TempDir("gb-wheel-") as work:
        t0 = time.time()
        dist = os.path.join(work, "dist")
        it.run([sys.executable, "-m", "pip", "wheel", it.SOURCE_DIR, "--no-deps", "--no-build-isolation",
                "-w", dist], "pip wheel", 480, it.clean_env(), cwd=work)
        wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
        if len(wheels) != 1 or not wheels[0].startswith("gpubridge-%s-" % ver):
            it.fail("pip wheel made %s, want one gpubridge-%s-*.whl" % (wheels, ver))
        print("ok: pip wheel built %s in %.1f s" % (wheels[0], time.time() - t0), flush=True)
        check_wheel(os.path.join(dist, wheels[0]), ver)

        t1 = time.time()
        venv = os.path.join(work, "venv")
        it.run([sys.executable, "-m", "venv", "--system-site-packages", venv], "python -m venv", 120, it.clean_env())
        it.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                os.path.join(dist, wheels[0])], "pip install the wheel into the venv", 240, it.clean_env(), cwd=work)
        print("ok: installed into a venv in %.1f s" % (time.time() - t1), flush=True)
        check_installed(venv, work, ver)
    print("6 passed, 0 failed (%.1f s)" % (time.time() - t0))


if __name__ == "__main__":
    main()
