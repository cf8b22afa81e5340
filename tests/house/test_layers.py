#!/usr/bin/env python3
"""Each folder under src/ may include only folders above it in the layer list
(docs/ARCHITECTURE.md); src/ folders have a README.md; no file passes 800 lines."""
import os
import re
import sys

LAYERS = ["base", "os", "device", "net", "boot", "algo", "island", "plan", "proxy", "trace", "stage", "core", "api"]
SRC = os.path.join(os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')

problems = []
checked = 0
for layer in os.listdir(SRC):
    path = os.path.join(SRC, layer)
    if not os.path.isdir(path):
        continue
    if layer not in LAYERS:
        problems.append(f"src/{layer}/ is not a known layer: add it to the list in docs/ARCHITECTURE.md and here")
        continue
    if not os.path.isfile(os.path.join(path, "README.md")):
        problems.append(f"src/{layer}/ has no README.md")
    for root, _, files in os.walk(path):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            file = os.path.join(root, name)
            rel = os.path.relpath(file, os.path.dirname(SRC))
            with open(file, encoding="utf-8") as f:
                lines = f.readlines()
            checked += 1
            if len(lines) > 800:
                problems.append(f"{rel}: {len(lines)} lines (split it by idea)")
            for n, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if not m or m.group(1) == "gpubridge":
                    continue
                used = m.group(1)
                if used not in LAYERS:
                    problems.append(f"{rel}:{n}: includes unknown folder {used}/")
                elif LAYERS.index(used) > LAYERS.index(layer):
                    problems.append(f"{rel}:{n}: {layer}/ may not include {used}/ (a layer below it)")

if checked < 20:
    problems.append(f"only {checked} source files found under {SRC}: wrong path?")
for p in problems:
    print("FAIL", p)
print(f"{checked} files checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
