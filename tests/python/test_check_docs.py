"""scripts/check_docs.py on a small made-up tree: of each kind of reference (a path, a
`fqntrace.` name, a module-relative name, a class attribute, a C++ `::` name, a GoogleTest name,
a pytest node id, a Markdown link) one good and one broken; exactly the broken ones are reported,
and a tree without them passes."""

import subprocess
import sys
import textwrap
from pathlib import Path

CHECKER = Path(__file__).resolve().parents[2] / "scripts" / "check_docs.py"

# (file, text); a line ending in "# broken: NAME" (or "<!-- broken: NAME -->") cites NAME wrongly.
TREE = {
    "python/fqntrace/__init__.py": '''\
        """The package."""
        ''',
    "python/fqntrace/api.py": '''\
        """Runs things; see `fqntrace.api.run` and docs/guide.md."""
        import os


        def run():
            """Starts a Runner (Runner.go)."""


        class Runner:
            def go(self):
                self.speed = 1
        ''',
    "src/real.py": "",
    "engine/engine.cpp": '''\
        #include <vector>
        namespace engine {
        // Engine::start is called from src/real.py.
        // Engine::halt was renamed and src/old.py removed.  broken: Engine::halt, src/old.py
        /* Engine::halt in a block comment is not code either. */
        class Engine { void start(); };
        }  // namespace engine
        ''',
    "tests/engine_test.cpp": '''\
        TEST(EngineTest, Starts) {}
        ''',
    "tests/test_tool.py": '''\
        def test_reads():
            pass
        ''',
    "scripts/tool.py": '''\
        """A tool: reads src/real.py (see api.run), never src/none.py."""  # broken: src/none.py
        # Runner.speed is set by Runner.go; api.walk is gone.  # broken: api.walk
        # Runner.stop never existed.  # broken: Runner.stop
        # Not ours: os.path.join, torch.nn.Linear, std::vector, trace.json, traces/out.json.
        ''',
    "docs/guide.md": '''\
        # Guide
        The code is in `src/real.py` and `engine/`; `src/gone.py` went. <!-- broken: src/gone.py -->
        Call `fqntrace.api.run()`, not `fqntrace.api.walk`.  <!-- broken: fqntrace.api.walk -->
        `api.run` starts a `Runner`; `api._gone` does not exist.  <!-- broken: api._gone -->
        `engine::Engine::start`, not `Engine::stop_all`.  <!-- broken: Engine::stop_all -->
        `EngineTest.Starts` passes; `EngineTest.Flies` is gone. <!-- broken: EngineTest.Flies -->
        `test_tool.py::test_reads` `test_tool.py::test_no` <!-- broken: test_tool.py::test_no -->
        Not ours: `torch.nn.Linear`, `std::vector`, `trace.json`, `Net.layers.0`.
        ```
        src/in_a_fence.py
        ```
        ''',
    "README.md": '''\
        See [the guide](docs/guide.md), not [that](docs/absent.md). <!-- broken: docs/absent.md -->
        ''',
}


def write_tree(root, with_broken):
    expected = set()
    for rel, text in TREE.items():
        lines = []
        for line in textwrap.dedent(text).splitlines():
            if "broken: " in line:
                if not with_broken:
                    continue
                names = line.rsplit("broken: ", 1)[1].removesuffix(" -->").split(", ")
                expected |= {(rel, len(lines) + 1, name) for name in names}
            lines.append(line)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return expected


def run_checker(root):
    return subprocess.run(
        [sys.executable, str(CHECKER), str(root)], capture_output=True, text=True, timeout=60
    )


def reported(stdout):
    """(file, line, name) of each `file:line: 'name' does not resolve (...)` line."""
    found = set()
    for line in stdout.splitlines():
        if " does not resolve" in line:
            where, _, rest = line.partition(": '")
            path, _, number = where.rpartition(":")
            found.add((path, int(number), rest.split("'", 1)[0]))
    return found


def test_reports_exactly_the_broken_references(tmp_path):
    expected = write_tree(tmp_path, with_broken=True)
    result = run_checker(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert reported(result.stdout) == expected, result.stdout


def test_a_tree_whose_references_all_resolve_passes(tmp_path):
    write_tree(tmp_path, with_broken=False)
    result = run_checker(tmp_path)
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr
