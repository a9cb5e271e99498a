"""The summary exporter (<stem>.summary.json) and `python -m fqntrace summary --json` agree, add
up, and show recompute time under activation checkpointing."""
import json
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


def test_summary_file_and_cli_agree_and_add_up(run, tmp_path):
    trace = tmp_path / "ck.json"
    run(CHECKPOINTED, {"FQNTRACE": str(trace), "FQNTRACE_FORMATS": "summary"}, check_rc=0)
    exported = json.load(open(tmp_path / "ck.summary.json"))
    cli = subprocess.run([sys.executable, "-m", "fqntrace", "summary", str(trace), "--json"],
                         capture_output=True, text=True, check=True)
    computed = json.loads(cli.stdout)
    modules = exported["modules"]
    assert set(computed["modules"]) == set(modules)
    for fqn, m in modules.items():
        for phase in PHASES:
            for field in ("self_ms", "total_ms", "flops", "self_ops"):
                assert abs(computed["modules"][fqn][phase][field] - m[phase][field]) < 1e-5, (
                    fqn, phase, field)
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
    assert modules["Net.blocks.0.0"]["calls"] == 2 and modules["Net.blocks.0.0"]["module_type"] == "Linear"
