#!/usr/bin/env python3
"""No include circle between the files of one src/ folder: within a folder
(its subfolders included), `#include "folder/file.h"` lines make a graph of
files, and it must have no cycle. X.c and X.h are one node "X", so foo.c
including foo.h is not a cycle. A cycle is named file by file, with the
line that makes each step.

A circle listed in KNOWN (none today) is allowed as it is (the same files,
no more) until it is broken, and a known circle that is gone is reported, to
be taken off the list."""
import os
import re
import sys

SRC = os.path.join(os.environ.get("GB_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"(([a-z_]+)/[^"]+)\.h"')

# Circles to break, by their files, and why each is there (none today: a
# new one is broken, not listed, unless breaking it must wait).
KNOWN = {}


def folder_graph(folder):
    """Node "sub/name" (relative to src/, no extension) -> {node it includes: "file:line"}."""
    edges = {}
    for root, _, files in os.walk(os.path.join(SRC, folder)):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, SRC)
            node = os.path.splitext(rel)[0]
            out = edges.setdefault(node, {})
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(2) != folder or m.group(1) == node:
                        continue
                    out.setdefault(m.group(1), f"src/{rel}:{n}")
    return edges


def strongly_connected(edges):
    """Tarjan's components of more than one node, each a sorted list."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def one_cycle(edges, comp):
    """A shortest cycle through the component's first node (breadth-first)."""
    members = set(comp)
    start = comp[0]
    parent = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                path.reverse()
                return path + [start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return comp + [start]


problems = []
known = []
nodes = 0
for folder in sorted(os.listdir(SRC)):
    if not os.path.isdir(os.path.join(SRC, folder)):
        continue
    edges = folder_graph(folder)
    nodes += len(edges)
    for comp in strongly_connected(edges):
        cycle = one_cycle(edges, comp)
        steps = "; ".join(f"{edges[a][b]} includes {b}.h" for a, b in zip(cycle, cycle[1:]))
        text = f"src/{folder}/: include circle {' -> '.join(cycle)} ({len(comp)} files in it: {', '.join(comp)}): {steps}"
        if frozenset(comp) in KNOWN:
            known.append(frozenset(comp))
            print("KNOWN", text)
        else:
            problems.append(text)

if nodes < 20:
    problems.append(f"only {nodes} source files found under {SRC}: wrong path?")
for comp in KNOWN:
    if comp not in known:
        print(f"NOTE the known circle of {', '.join(sorted(comp))} is gone: take it off KNOWN in {__file__}")
for p in problems:
    print("FAIL", p)
print(f"{nodes} files checked, {len(problems)} include circles ({len(known)} known ones left)")
sys.exit(1 if problems else 0)
