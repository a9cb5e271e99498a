"""The main venv's real build (for the torch scripts/setup.sh pins) imported under this venv's
torch (the compatibility tier's, scripts/compat.sh, which sets FQNTRACE_OTHER_BUILD to the main
venv): the library is never loaded, a traced program runs on exactly as untraced with one line
that names the rebuild command, and doctor says why."""

import os
import sys

import pytest
import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
)
from installed_copy import copy_package, rebuild_prefix, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OTHER_VENV = os.environ.get("FQNTRACE_OTHER_BUILD", "")


@pytest.fixture(scope="module")
def other_build(tmp_path_factory):
    assert OTHER_VENV, "set FQNTRACE_OTHER_BUILD to a venv with a build for another torch"
    return copy_package(OTHER_VENV, tmp_path_factory.mktemp("other"))


def _record(pythonpath):
    proc = run(["-c", "from fqntrace import _build_info as b; print(b.TORCH_VERSION)"], pythonpath)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_build_for_another_torch_leaves_tracing_off_with_one_line(other_build, tmp_path):
    built_for = _record(other_build)
    assert built_for and built_for != torch.__version__, (built_for, torch.__version__)
    script = os.path.join(HERE, "train_loop.py")
    trace = tmp_path / "run.json"
    plain = run([script], other_build)
    traced = run([script], other_build, {"FQNTRACE": str(trace)})
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    lines = traced.stderr.splitlines()
    assert len(lines) == 1, traced.stderr
    assert lines[0].startswith(
        f"fqntrace: FQNTRACE is set but tracing is off: it was built for torch {built_for} and "
        f"this is torch {torch.__version__}; rebuild it for this torch: {rebuild_prefix()}"
    )
    assert not trace.exists()
    doctor = run(["-m", "fqntrace", "doctor"], other_build)
    assert doctor.returncode == 1
    assert f"tracing: cannot start here: it was built for torch {built_for}" in doctor.stdout


def test_this_venvs_own_build_traces():
    from fqntrace import _build, _build_info

    assert _build_info.TORCH_VERSION == torch.__version__ and _build.problem(torch) is None
    doctor = run(["-m", "fqntrace", "doctor"], "")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "tracing: can start here" in doctor.stdout
