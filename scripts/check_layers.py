#!/usr/bin/env python3
"""Checks the C++ folders' dependencies: every `#include "folder/..."` must follow an allowed
edge of the layer table below, and the folders must form no cycle. Run by ctest
(layering_test); prints each offending include. Standard library only.

    python3 scripts/check_layers.py [source root]
"""

import os
import re
import sys

# folder -> folders it may include from. include/fqntrace/ is reached as "fqntrace/...".
ALLOWED = {
    "include": set(),
    # word-at-a-time byte helpers, standard library only: the core and the CLI's engine share them
    "common": set(),
    "buffer": set(),
    "exporters": {"buffer"},
    "drain": {"buffer", "exporters"},
    "plugin": {"common", "buffer", "drain", "exporters"},
    "record_function": {"include", "buffer", "plugin"},
    "binding": {"plugin", "record_function"},
    # the CLI's native summary (fqntrace.analysis._native_summary): nothing of the core, no torch
    "analysis": {"common"},
    "tests/support": {"buffer", "drain", "exporters"},
    "bench": {"tests/support", "buffer", "drain", "exporters"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of_include(path):
    first = path.split("/", 1)[0]
    if first == "fqntrace":
        return "include"
    if first == "tests":
        return "tests/" + path.split("/")[1]
    return first


def folder_of_file(rel):
    if rel.startswith("tests/"):
        return "tests/" + rel.split("/")[1]
    return rel.split("/", 1)[0]


def main():
    root = os.path.abspath(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    )
    edges, problems = {}, []
    for top in ALLOWED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                src = folder_of_file(rel)
                if src not in ALLOWED:
                    continue
                with open(path, encoding="utf-8") as f:
                    for inc in INCLUDE.findall(f.read()):
                        dst = folder_of_include(inc)
                        if dst == src or dst not in ALLOWED:
                            continue
                        edges.setdefault(src, set()).add(dst)
                        if dst not in ALLOWED[src]:
                            problems.append(
                                f"{rel}: includes \"{inc}\": {src}/ may not depend on {dst}/"
                            )
    # A cycle among the edges actually present (the table itself must stay acyclic too).
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(edges.get(node, set()) | ALLOWED.get(node, set())):
            if state.get(nxt) == "open":
                problems.append("include cycle: " + " -> ".join(stack + [node, nxt]))
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for node in sorted(ALLOWED):
        if node not in state:
            visit(node, [])
    for p in problems:
        print(p)
    if problems:
        return 1
    print(
        "layers ok: "
        + ", ".join(f"{k} -> {{{', '.join(sorted(v))}}}" for k, v in sorted(edges.items()))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
