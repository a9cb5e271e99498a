"""Backward and recompute module spans (docs/trace-format.md, *Module tracks*): a traced training
step's trace, parsed back. Every engine wrapper of a module lies inside a span of each level of
its fqn on its thread's module track; the spans nest; recompute module ranges are copied; the
readers' numbers do not change because of them."""

import json

import pytest
from conftest import load_trace, run_python, slices
from fqntrace.analysis import summarize, trace_events, validate, whole_file

TRACK_BIT = 0x40000000
WRAPPER = "autograd::engine::evaluate_function: "

PROGRAM = r"""
import sys, torch
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
torch.set_num_threads(1)

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(16, 8)
    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(8, 1)
    def forward(self, x):
        x = self.embed(x)
        for i, b in enumerate(self.blocks):
            x = checkpoint(b, x, use_reentrant=REENTRANT) if i == 1 else b(x)
        return self.head(x)

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
"""


def _trace(tmp_path, reentrant, name="spans.json", extra=None):
    path = tmp_path / name
    env = {"FQNTRACE": str(path)}
    env.update(extra or {})
    run_python(PROGRAM.replace("REENTRANT", str(reentrant)), env, check_rc=0)
    return path


def _prefixes(fqn):
    parts = fqn.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


@pytest.mark.parametrize("reentrant", [False, True])
def test_backward_nodes_lie_inside_their_module_spans(tmp_path, reentrant):
    path = _trace(tmp_path, reentrant)
    events = slices(load_trace(path))
    spans = [e for e in events if e.get("cat") == "module_span"]
    assert spans, "no module spans"
    for s in spans:
        assert s["tid"] & TRACK_BIT, s
        assert s["name"] == "nn.Module: " + s["args"]["fqn"]
        assert s["args"]["phase"] in ("backward", "recompute")
    # Proper nesting on each module track (Perfetto folds them like the forward spans).
    assert trace_events.nest(spans)[1] is None
    by_track = {}
    for s in spans:
        by_track.setdefault((s["pid"], s["tid"]), []).append(s)

    def covers(s, e):
        return s["ts"] <= e["ts"] + 1e-3 and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3

    wrappers = [e for e in events if e["name"].startswith(WRAPPER) and e["args"]["fqn"] != "Global"]
    assert wrappers
    for w in wrappers:
        track = by_track.get((w["pid"], w["tid"] | TRACK_BIT), [])
        for level in _prefixes(w["args"]["fqn"]):
            assert any(
                s["args"]["fqn"] == level and s["args"]["phase"] == "backward" and covers(s, w)
                for s in track
            ), (level, w)
    # Each backward span covers only nodes of its own subtree (or the engine's gaps between).
    for s in spans:
        if s["args"]["phase"] != "backward":
            continue
        inside = [
            w
            for w in wrappers
            if w["tid"] | TRACK_BIT == s["tid"]
            and covers(s, w)
            and w["args"]["depth"]
            == min(x["args"]["depth"] for x in wrappers if covers(s, x) and x["tid"] == w["tid"])
        ]
        assert inside, s
        assert all(
            w["args"]["fqn"] == s["args"]["fqn"]
            or w["args"]["fqn"].startswith(s["args"]["fqn"] + ".")
            for w in inside
        ), s
    # Module types come from the forward spans; the ModuleList level has none.
    types = {s["args"]["fqn"]: s["args"].get("module_type") for s in spans}
    assert types["Net.blocks.0.fc1"] == "Linear"
    assert types["Net"] == "Net"
    assert types["Net.blocks"] is None
    # The checkpointed block's re-run forward: its recompute ranges, copied to the module track.
    recompute = [
        e
        for e in events
        if e.get("cat") == "user_annotation"
        and e["args"]["phase"] == "recompute"
        and "module_type" in e["args"]
    ]
    copies = [s for s in spans if s["args"]["phase"] == "recompute"]
    assert {e["args"]["fqn"] for e in recompute} >= {"Net.blocks.1", "Net.blocks.1.fc1"}
    assert sorted((e["args"]["fqn"], e["ts"], e["dur"]) for e in recompute) == sorted(
        (s["args"]["fqn"], s["ts"], s["dur"]) for s in copies
    )


def test_readers_ignore_the_spans(tmp_path):
    path = _trace(tmp_path, False, extra={"FQNTRACE_FORMATS": "summary"})
    trace = load_trace(path)
    assert any(e.get("cat") == "module_span" for e in trace["traceEvents"])
    # validate accepts them (nesting per track, fqn and phase present).
    assert "ok" in validate.validate_file(str(path)).lower()
    # The same numbers with and without them: whole-file and streamed readers.
    without = dict(trace)
    without["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "module_span"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(without))

    def numbers(p):
        s = summarize.load_for_summary(str(p))
        s.pop("trace", None)
        return s

    assert numbers(path) == numbers(bare)
    whole = summarize.summarize(whole_file.load(str(path)))
    whole.pop("trace", None)
    assert whole == numbers(bare)
    # The summary file written at exit does not count them either: calls are forward spans only.
    exported = json.loads((tmp_path / "spans.summary.json").read_text())
    assert exported["modules"]["Net.blocks.0.fc1"]["calls"] == 3
    assert numbers(path)["modules"]["Net.blocks.0.fc1"]["calls"] == 3


def test_json_lines_trace_has_the_spans_too(tmp_path):
    path = _trace(tmp_path, False, name="spans.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    spans = [e for e in lines if e.get("cat") == "module_span"]
    assert {s["args"]["fqn"] for s in spans} >= {"Net", "Net.blocks.2.fc2", "Net.head"}
    names = {e["tid"]: e["args"]["name"] for e in lines if e.get("name") == "thread_name"}
    assert all("modules in backward" in names[s["tid"]] for s in spans)
