#!/usr/bin/env python3
"""A build for users, a build for developers: `make` (and `make demo`)
configures without -Werror, as CMake's default is, so that a newer compiler's
new warning does not stop a user's build; `make test` and the sanitizer
targets configure with -Werror, and WERROR=OFF leaves it out of them. Read from
what make would run (`make -n`) for a build folder that does not exist yet."""
import os
import re
import subprocess
import sys
import tempfile

source = os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def werror(target, *extra):
    """The -DGPUBRIDGE_WERROR values make would configure with for target."""
    with tempfile.TemporaryDirectory() as tmp:
        build = os.path.join(tmp, "b")
        out = subprocess.run(["make", "-n", "-C", source, target, f"BUILD={build}", f"ASAN_BUILD={build}-a",
                              f"TSAN_BUILD={build}-t", f"PYTHON={sys.executable}", *extra],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            print(f"FAIL: make -n {target} {' '.join(extra)} exited {out.returncode}: {out.stderr[-400:]}")
            sys.exit(1)
        return set(re.findall(r"-DGPUBRIDGE_WERROR=(\w*)", out.stdout))


failed = []
for target, extra, want in [("build", (), {"OFF"}), ("demo", (), {"OFF"}), ("test", (), {"ON"}),
                            ("test-asan", (), {"ON"}), ("test-tsan", (), {"ON"}),
                            ("test", ("WERROR=OFF",), {"OFF"}), ("build", ("WERROR=ON",), {"ON"})]:
    got = werror(target, *extra)
    line = f"make {target} {' '.join(extra)}".strip()
    if got != want:
        failed.append(f"{line}: -DGPUBRIDGE_WERROR={sorted(got)}, expected {sorted(want)}")
    else:
        print(f"ok: {line} configures with -DGPUBRIDGE_WERROR={next(iter(got))}")
if failed:
    print("FAIL: " + "; ".join(failed))
    sys.exit(1)
print("PASS: make builds without -Werror, make test and the sanitizer targets with it")
