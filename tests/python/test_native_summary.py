"""The native summary engine (fqntrace.analysis._native_summary) gives exactly the summary the
Python loop (summarize.StreamSummary) gives, on real traces of every kind the tests make: a
transformer with training steps and memory events, activation checkpointing (recompute), a
collective, backward module spans, torch.profiler's own trace annotated by fqntrace, JSON Lines,
.gz, cut off, pretty-printed (read by the general path and re-encoded for the engine), and bad
input (the same error text or the same tolerance). Without the module the verbs still work."""
import gzip
import json
import os
import subprocess
import sys

import pytest

from fqntrace.analysis import summarize, traceio

pytestmark = pytest.mark.skipif(summarize._native is None,
                                reason="the native summary is not built (libsimdjson-dev)")

PROGRAM = r"""
import os, sys, tempfile, torch
import torch.distributed as dist
import torch.profiler as tp
from torch.utils.checkpoint import checkpoint
import fqntrace
from fqntrace import demo
out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()) for _ in range(2))
        self.head = torch.nn.Linear(16, 1)
    def forward(self, x):
        x = self.blocks[0](x)
        x = checkpoint(self.blocks[1], x, use_reentrant=False)
        return self.head(x)

model = demo.TinyTransformer(vocab=64, dim=16, heads=2, layers=1, seq=8)
tokens = torch.randint(0, 64, (2, 8))
net = Net()
params = list(model.parameters()) + list(net.parameters())
opt = torch.optim.SGD(params, lr=0.01)
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)

def step():
    opt.zero_grad()
    (model(tokens).float().pow(2).mean() + net(torch.randn(4, 16)).pow(2).mean()).backward()
    dist.all_reduce(net.head.weight.grad)
    opt.step()

step()
with fqntrace.profile(out + "/t.json"):
    for _ in range(3):
        step()
    # torch.profiler's own trace, annotated with fqn and phase as fqntrace writes it
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        step()
    prof.export_chrome_trace(out + "/kineto.json")
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("native")
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(folder)], capture_output=True,
                          text=True, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != "FQNTRACE"},
                               "FQNTRACE_FORMATS": "jsonl", "FQNTRACE_MEMORY": "1"})
    assert proc.returncode == 0, proc.stderr
    chrome, jsonl = folder / "t.json", folder / "t.jsonl"
    paths = [chrome, jsonl, folder / "kineto.json"]
    data = chrome.read_bytes()
    (folder / "t.json.gz").write_bytes(gzip.compress(data))
    (folder / "cut.json").write_bytes(data[:len(data) * 3 // 5])
    (folder / "cut.jsonl").write_bytes(jsonl.read_bytes()[:len(data) * 2 // 5])
    (folder / "cut.json.gz").write_bytes(gzip.compress(data)[:len(data) // 20])
    (folder / "pretty.json").write_text(json.dumps(json.loads(data), indent=1))
    paths += [folder / n for n in ("t.json.gz", "cut.json", "cut.jsonl", "cut.json.gz",
                                   "pretty.json")]
    return [str(p) for p in paths]


def both(path, monkeypatch):
    """(native, python): each (summary, notes) or the error it raised, as text."""
    out = []
    for engine in (summarize._native, None):
        monkeypatch.setattr(summarize, "_native", engine)
        monkeypatch.setattr(summarize, "_slow_noted", True)
        notes = []
        try:
            summary, times = summarize.summarize_with_steps(path, notes.append)
            out.append((json.dumps(summary), notes, None if times is None else times._times))
        except traceio.TraceError as error:
            out.append((type(error).__name__, str(error)))
    monkeypatch.undo()
    return out


def test_native_summary_equals_the_python_loop_on_real_traces(traces, monkeypatch):
    chrome = traces[0]
    summary = summarize.summarize_stream(chrome)
    modules = summary["modules"]
    # what the traces hold, so each rule of the engine is exercised
    assert summary["steps"]["recorded"] >= 3
    assert any(m["recompute"]["self_ms"] > 0 for m in modules.values())
    assert any(m["forward"]["collectives"] > 0 or m["backward"]["collectives"] > 0
               for m in modules.values())
    assert any(m["forward"]["alloc_bytes"] > 0 for m in modules.values())
    text = open(chrome).read()
    assert '"cat":"module_span"' in text.replace(" ", "")
    for path in traces:
        native, python = both(path, monkeypatch)
        assert native == python, path
    kineto = summarize.summarize_stream(traces[2])
    assert any(m["forward"]["self_ms"] > 0 for f, m in kineto["modules"].items() if f != "Global")


def test_bad_input_behaves_as_in_the_python_loop(traces, tmp_path, monkeypatch):
    lines = open(traces[0]).read().split("\n")
    middle = len(lines) // 2
    op = next(i for i in range(middle, len(lines)) if '"cpu_op"' in lines[i])
    cases = {
        "damaged": {middle: '{"ph": "X", "name": broken'},
        "truncated_line": {middle: lines[middle][:len(lines[middle]) // 2]},
        "wrong_types": {op: lines[op].replace('"ts":', '"ts":"x","was":', 1),
                        op + 1: lines[op + 1].replace('"args":{', '"args":7,"a":{', 1),
                        op + 2: lines[op + 2].replace('"fqn":', '"fqn":3,"f":', 1),
                        op + 3: lines[op + 3].replace('"dur":', '"dur":-1,"d":', 1),
                        op + 4: lines[op + 4].replace('"phase":', '"phase":null,"p":', 1),
                        op + 5: lines[op + 5].replace('"pid":', '"pid":"7","q":', 1),
                        op + 7: lines[op + 7].replace('"tid":', '"tid":"9","r":', 1)},
        "bad_literal": {op: lines[op].replace('"args":{', '"z":tru,"args":{', 1)},
        "big_integer": {op: lines[op].replace('"args":{', '"args":{"flops":123456789012345678901234,', 1)},
        "not_in_end_order": {op: lines[op + 3], op + 3: lines[op]},
    }
    for name, edits in cases.items():
        changed = list(lines)
        for i, line in edits.items():
            changed[i] = line
        path = tmp_path / (name + ".json")
        path.write_text("\n".join(changed))
        native, python = both(str(path), monkeypatch)
        assert native == python, name


def test_verbs_work_without_the_module_and_say_so_once(traces):
    code = ("import sys; sys.modules['fqntrace.analysis._native_summary'] = None\n"
            "from fqntrace.analysis.cli import main\n"
            "sys.exit(main())")
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    proc = subprocess.run([sys.executable, "-c", code, "summary", traces[0], "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1 and "native summary module is not built" in proc.stderr
    native = subprocess.run([sys.executable, "-m", "fqntrace", "summary", traces[0], "--json"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert native.returncode == 0 and native.stderr == ""
    assert native.stdout == proc.stdout
