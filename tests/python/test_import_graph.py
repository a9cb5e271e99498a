"""No import circles: the package (capture and analysis halves) and bench/ each import in one
direction, also through imports inside functions (a lazy import still ties two modules into one
unit a reader has to hold together)."""

import ast
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(ROOT, "python", "fqntrace")
BENCH = os.path.join(ROOT, "bench")


def package_modules():
    """{dotted name below fqntrace: path}, the package's __init__ files left out (the lazy
    public API imports everything on demand and nothing imports it by name)."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                relative = os.path.relpath(os.path.join(folder, name), PACKAGE)[:-3]
                out[relative.replace(os.sep, ".")] = os.path.join(folder, name)
    return out


def package_imports(path, known):
    deps = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "fqntrace"
        ):
            base = node.module.split(".", 1)[1] if "." in node.module else ""
            if base in known:
                deps.add(base)
            for alias in node.names:  # `from fqntrace.analysis import report`: a module
                candidate = f"{base}.{alias.name}" if base else alias.name
                if candidate in known:
                    deps.add(candidate)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fqntrace.") and alias.name[9:] in known:
                    deps.add(alias.name[9:])
    return deps


def bench_imports(path, known):
    deps = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            deps.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            deps.update(alias.name.split(".")[0] for alias in node.names)
    return deps & known


def circles(graph):
    found, done, path = [], set(), []

    def visit(m):
        if m in path:
            found.append(" -> ".join(path[path.index(m) :] + [m]))
            return
        if m in done:
            return
        path.append(m)
        for d in sorted(graph[m]):
            visit(d)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    return found


def test_the_package_has_no_import_circle():
    modules = package_modules()
    assert {"_hooks", "_compile", "analysis.report", "analysis.results"} <= set(modules)
    graph = {m: package_imports(p, modules) - {m} for m, p in modules.items()}
    assert "_compile" in graph["_hooks"]  # the reader sees imports inside functions
    assert circles(graph) == []


def test_bench_has_no_import_circle():
    modules = {
        name[:-3]: os.path.join(BENCH, name) for name in os.listdir(BENCH) if name.endswith(".py")
    }
    graph = {m: bench_imports(p, set(modules)) - {m} for m, p in modules.items()}
    assert "doc_tables" in graph["cli_bench"]
    assert circles(graph) == []
