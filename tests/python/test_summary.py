"""FQNTRACE_FORMATS=summary's <stem>.summary.json is what `python -m fqntrace summary --json`
prints for the finished trace (a session ending at exit, or a fqntrace.profile() block); its
numbers add up and show recompute time under activation checkpointing."""

import json
import os
import subprocess
import sys

CHECKPOINTED = """
import torch
from torch.utils.checkpoint import checkpoint
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()) for _ in range(2))
        self.head = torch.nn.Linear(32, 1)
    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)
n = Net()
for _ in range(2):
    n(torch.randn(16, 32, requires_grad=True)).sum().backward()
"""

PHASES = ("forward", "backward", "recompute")


def cli_summary_json(trace):
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", "--json", str(trace)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_summary_file_at_exit_is_the_clis_summary_and_adds_up(run, tmp_path):
    trace = tmp_path / "ck.json"
    proc = run(CHECKPOINTED, {"FQNTRACE": str(trace), "FQNTRACE_FORMATS": "summary"}, check_rc=0)
    assert "fqntrace" not in proc.stderr, proc.stderr
    written = (tmp_path / "ck.summary.json").read_text()
    assert written == cli_summary_json(trace)
    exported = json.loads(written)
    modules = exported["modules"]
    # Self times add up to the step; a parent's total covers its children's.
    self_sum = sum(m[p]["self_ms"] for m in modules.values() for p in PHASES)
    assert abs(self_sum - exported["step_ms"]) < 1e-3
    for phase in PHASES:
        children = [modules[f][phase]["total_ms"] for f in ("Net.blocks.0", "Net.blocks.1")]
        assert modules["Net.blocks"][phase]["total_ms"] + 1e-6 >= sum(children)
        assert modules["Net"][phase]["total_ms"] + 1e-6 >= modules["Net.blocks"][phase]["total_ms"]
    # The re-run forward of each checkpointed Linear is recompute time, not backward time.
    for fqn in ("Net.blocks.0.0", "Net.blocks.1.0"):
        assert modules[fqn]["recompute"]["self_ms"] > 0, fqn
        assert modules[fqn]["recompute"]["flops"] == modules[fqn]["forward"]["flops"], fqn
    assert modules["Net.head"]["recompute"]["self_ms"] == 0
    assert (
        modules["Net.blocks.0.0"]["calls"] == 2
        and modules["Net.blocks.0.0"]["module_type"] == "Linear"
    )


PROFILED = """
import os, sys, torch, fqntrace
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
for path in sys.argv[1:]:
    with fqntrace.profile(path):
        net(torch.randn(4, 8)).sum().backward()
    # Written when the block ends, not at exit.
    print(os.path.exists(path.rsplit(".", 1)[0] + ".summary.json"))
"""


def test_summary_file_of_each_profile_block_is_the_clis_summary(tmp_path):
    traces = [tmp_path / "first.jsonl", tmp_path / "second.json"]
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env["FQNTRACE_FORMATS"] = "summary"
    proc = subprocess.run(
        [sys.executable, "-c", PROFILED, *map(str, traces)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True\nTrue\n"
    for trace in traces:
        written = (tmp_path / (trace.stem + ".summary.json")).read_text()
        assert written == cli_summary_json(trace), trace
        assert "Global" in json.loads(written)["modules"]


def test_a_summary_that_cannot_be_written_costs_one_line(run, tmp_path):
    trace = tmp_path / "t.json"
    (tmp_path / "t.summary.json").mkdir()  # nothing can be written in its place
    proc = run(CHECKPOINTED, {"FQNTRACE": str(trace), "FQNTRACE_FORMATS": "summary"}, check_rc=0)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"fqntrace: {tmp_path}/t.summary.json not written ("
    ), proc.stderr
    assert f"`python -m fqntrace summary --json {trace} > {tmp_path}/t.summary.json`" in lines[0]
    assert json.loads(trace.read_text())["fqntrace"]["complete"]
