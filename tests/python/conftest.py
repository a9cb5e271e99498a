import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code, env_extra=None, cwd=None, check_rc=None):
    """Runs `code` in a fresh interpreter of this venv; returns CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env.update(env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr
    return proc


def cli(*args):
    """`python -m fqntrace ARGS` in a fresh interpreter of this venv (FQNTRACE unset); returns
    the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def cli_stdout(*args):
    """cli(), which must succeed: its stdout."""
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def read_top(path):
    """top's source of a whole trace, read to its end and settled (what `top --once` shows),
    and its rows at every level by fqn."""
    from fqntrace.analysis.top.sources import Source
    from fqntrace.analysis.top.tree import build_rows

    source = Source(str(path), window_s=600)
    while source.poll() is not None:
        pass
    source.settle()
    rows = {}

    def walk(nodes):
        for r in nodes:
            rows[r.fqn] = r
            walk(r.children)

    walk(build_rows([source]))
    return source, rows


def load_trace(path):
    with open(path) as f:
        return json.load(f)


def slices(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture
def run():
    return run_python


def pytest_configure(config):
    # HTA's pandas calls warn on every parse; they are not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:hta")
    config.addinivalue_line("filterwarnings", "ignore:.*inplace.*")
