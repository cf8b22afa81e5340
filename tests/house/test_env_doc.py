#!/usr/bin/env python3
"""docs/ENV.md is generated from the parameter table (`make env-doc`): it must
match what `gpubridge-info -c --markdown` prints for this build."""
import os
import subprocess
import sys

source = os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
build = os.environ.get("GB_TEST_BUILD_DIR", "build")
printed = subprocess.run([os.path.join(build, "bin", "gpubridge-info"), "-c", "--markdown"], capture_output=True,
                         text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                     if not k.startswith("GPUBRIDGE_")})
with open(os.path.join(source, "docs", "ENV.md"), encoding="utf-8") as f:
    kept = f.read()
if printed.returncode != 0 or printed.stdout != kept:
    print("FAIL: docs/ENV.md differs from `gpubridge-info -c --markdown`: run `make env-doc`")
    sys.exit(1)
print(f"PASS: docs/ENV.md matches the parameter table ({kept.count('GPUBRIDGE_')} mentions)")
