"""The installed package knows which torch its tracer was built for (fqntrace/_build_info.py,
written by the build): under another torch a traced program runs on untouched with one line that
names the rebuild command; `doctor` says what was built for what; and a part of the Python side
that this torch cannot support is off on its own (docs/install.md)."""

import json
import os
import sys

import pytest
import torch
from installed_copy import copy_package, rebuild_prefix, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = sys.prefix
TRAIN = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
print(f"{loss.item():.6f}")
"""
OTHER = "2.12.0+cpu"  # what the faked record says the tracer was built for


@pytest.fixture(scope="module")
def other_build(tmp_path_factory):
    return copy_package(VENV, tmp_path_factory.mktemp("other"), torch_version=OTHER)


def test_the_record_names_this_venvs_torch():
    from fqntrace import _build, _build_info

    assert _build_info.TRACER and _build_info.TORCH_VERSION == torch.__version__
    assert _build_info.TORCH_GIT_VERSION == torch.version.git_version
    assert _build.problem(torch) is None
    # pip recorded where it installed from: the rebuild command names this repository.
    assert _build.installed_from() == ROOT
    assert _build.rebuild_command() == rebuild_prefix() + ROOT


def test_traced_program_under_another_torch_runs_untouched_with_one_line(other_build, tmp_path):
    trace = tmp_path / "t.json"
    plain = run(["-c", TRAIN], other_build)
    traced = run(["-c", TRAIN], other_build, {"FQNTRACE": str(trace)})
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    assert traced.stderr == (
        f"fqntrace: FQNTRACE is set but tracing is off: it was built for torch {OTHER} and this "
        f"is torch {torch.__version__}; rebuild it for this torch: {rebuild_prefix()}{ROOT}\n"
    )
    assert not trace.exists()


def test_profile_under_another_torch_runs_its_body_untraced(other_build, tmp_path):
    trace = tmp_path / "t.json"
    code = (
        "import fqntrace\n"
        f"with fqntrace.profile({str(trace)!r}) as path:\n"
        + "".join("    " + line + "\n" for line in TRAIN.strip().splitlines())
        + "print('yielded', path)\n"
    )
    proc = run(["-c", code], other_build)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "yielded None"
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(
        f"fqntrace: profile() runs its body untraced: it was built for torch {OTHER}"
    )
    assert not trace.exists()


def test_doctor_says_what_was_built_for_what(other_build):
    here = run(["-m", "fqntrace", "doctor"], "")
    assert here.returncode == 0, here.stdout + here.stderr
    assert f"built: tracer for torch {torch.__version__}" in here.stdout
    assert "tracing: can start here" in here.stdout
    features = [line for line in here.stdout.splitlines() if line.startswith("  ")]
    assert len(features) >= 6 and all(line.endswith(": yes") for line in features), here.stdout
    version = run(["-m", "fqntrace", "--version"], "")
    assert version.returncode == 0 and version.stdout.startswith("fqntrace 0.1.0 at ")
    other = run(["-m", "fqntrace", "doctor"], other_build)
    assert other.returncode == 1
    assert (
        f"tracing: cannot start here: it was built for torch {OTHER} and this is torch "
        f"{torch.__version__}"
    ) in other.stdout


def test_a_part_this_torch_lacks_is_off_alone(tmp_path):
    """Without the optimizer-step hook (a private API), steps are off with one line; the trace
    and module names are not."""
    trace = tmp_path / "t.json"
    code = (
        "import torch.optim.optimizer as optimizer\n"
        "del optimizer.register_optimizer_step_post_hook\n"
        "import fqntrace\n"
        f"with fqntrace.profile({str(trace)!r}):\n"
        + "".join("    " + line + "\n" for line in TRAIN.strip().splitlines())
    )
    proc = run(["-c", code], "")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("fqntrace: training steps from optimizer steps: off (ImportError")
    assert proc.stderr.rstrip().endswith("the rest of tracing goes on")
    events = json.load(open(trace))["traceEvents"]
    assert any(e.get("args", {}).get("fqn") == "Sequential.0" for e in events)
    assert not any(e.get("name", "").startswith("ProfilerStep#") for e in events)
    check = run(["-m", "fqntrace", "validate", str(trace)], "")
    assert check.returncode == 0, check.stdout + check.stderr
