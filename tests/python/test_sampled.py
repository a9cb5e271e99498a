"""FQNTRACE_SAMPLE=p (docs/sampling.md): ops are recorded with probability p through torch's own
sampling; module scopes, steps, user scopes and every autograd node stay complete, each node
still finds its module, and every verb reads the trace. Real runs of the demo transformer, full
and sampled, compared event by event; the summary's rules on a hand-made trace."""

import collections
import gzip
import json
import os
import subprocess
import sys

import pytest
from fqntrace.analysis import sampled, summarize, tracestream

P = 0.05
STEPS = 12


def _demo(path, **env):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    full_env.update({"FQNTRACE": str(path), **env})
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", str(STEPS)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _events(path):
    with tracestream.TraceStream(str(path)) as stream:
        events = [e for batch, _ in stream.batches() for e in batch]
        return stream.header, events


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same program traced three ways: full, sampled, sampled without module spans (then
    every node is written)."""
    d = tmp_path_factory.mktemp("sampled")
    out = {"full": d / "full.jsonl", "sampled": d / "sampled.jsonl", "nospans": d / "nospans.jsonl"}
    _demo(out["full"])
    _demo(out["sampled"], FQNTRACE_SAMPLE=str(P))
    _demo(out["nospans"], FQNTRACE_SAMPLE=str(P), FQNTRACE_MODULE_SPANS="0")
    return {k: (path, *_events(path)) for k, path in out.items()}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ops(events):
    return [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "Fwd thread id" not in e["args"]
    ]


def _nodes(events):
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "cpu_op"
        and "Fwd thread id" in e["args"]
        and not e["name"].startswith("autograd::engine")
    ]


def _modules(events):
    return collections.Counter(
        (e["args"]["fqn"], e["args"]["phase"])
        for e in events
        if e.get("cat") == "user_annotation" and "module_type" in e["args"]
    )


def test_the_header_says_p_and_the_trace_validates(runs):
    _, header, _ = runs["sampled"]
    assert header["sample"] == P and header["sampleNodeSpans"] is True
    assert runs["nospans"][1]["sample"] == P and "sampleNodeSpans" not in runs["nospans"][1]
    assert "sample" not in runs["full"][1]
    for key in runs:
        proc = _cli("validate", runs[key][0])
        assert proc.returncode == 0 and proc.stdout.startswith("ok:"), (
            key,
            proc.stdout,
            proc.stderr,
        )


def test_ops_are_sampled_and_the_structure_is_complete(runs):
    _, _, full = runs["full"]
    _, _, samp = runs["sampled"]
    ratio = len(_ops(samp)) / len(_ops(full))
    assert P / 2 < ratio < 2 * P, (len(_ops(samp)), len(_ops(full)))
    # every module call, forward and step, as in the full trace
    assert _modules(samp) == _modules(full)

    def steps(events):
        return sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))

    assert steps(samp) == steps(full) and len(steps(full)) == STEPS
    # a fraction of the nodes is written; the backward spans carry all their time
    assert 0 < len(_nodes(samp)) < len(_nodes(full)) / 2
    spans = [e for e in samp if e.get("cat") == "module_span" and e["args"]["phase"] == "backward"]
    leaves = [
        e for e in spans if e["args"].get("module_type") in ("Linear", "LayerNorm", "Embedding")
    ]
    assert leaves and all(
        isinstance(e["args"].get("node_ns"), int) and e["args"]["node_ns"] > 0 for e in leaves
    )
    # ops outside every recorded range say how deep they lie on the stack
    loose = [
        e
        for e in _ops(samp)
        if e["args"]["depth"] == 0
        and e["args"]["fqn"] == "Global"
        and e["args"]["phase"] == "forward"
    ]
    assert loose and all(isinstance(e["args"].get("stack_depth"), int) for e in loose)


def test_every_node_finds_its_module_without_the_forward_ops(runs):
    """Without spans every node is written: each one names the module the full trace names for
    it, though 95 % of the forward ops that created them were never seen."""
    _, _, full = runs["full"]
    _, _, nospans = runs["nospans"]

    def key(events):
        return collections.Counter((e["name"], e["args"]["fqn"]) for e in _nodes(events))

    assert key(nospans) == key(full)
    assert sum(n for (_, fqn), n in key(full).items() if fqn != "Global") > 0.9 * len(_nodes(full))
    # with spans, the written nodes are a sample of the same pairs
    assert set(key(runs["sampled"][2])) <= set(key(full))


def test_the_summary_counts_the_complete_ranges(runs):
    full = json.loads(_cli("summary", runs["full"][0], "--json").stdout)
    proc = _cli("summary", runs["sampled"][0], "--json")
    samp = json.loads(proc.stdout)
    assert samp["sample"] == P and "sample" not in full
    # the two count a module's time differently, and the sampled JSON says how (issue 43)
    assert samp["time_definition"].startswith("scope wall time") and "time_definition" not in full
    table = _cli("summary", runs["sampled"][0]).stdout
    assert "a module's time is its scopes' own wall time" in table
    for fqn, entry in full["modules"].items():
        if entry["calls"]:
            assert samp["modules"][fqn]["calls"] == entry["calls"], fqn
        if entry["backward"]["self_ms"] > 0 and fqn != "Global":
            assert samp["modules"][fqn]["backward"]["self_ms"] > 0, fqn

    # ops are scaled back: within a factor 2 of the full count (thousands sampled)
    def ops(s):
        return sum(m[p]["self_ops"] for m in s["modules"].values() for p in ("forward", "backward"))

    assert 0.5 < ops(samp) / ops(full) < 2
    text = _cli("summary", runs["sampled"][0]).stdout
    assert f"sampled trace (FQNTRACE_SAMPLE={P:g})" in text


def _engine_and_fallback(path, monkeypatch):
    """(native engine, Python fallback): each the summary's JSON and the per-step times."""
    out = []
    for engine in (summarize._native, None):
        monkeypatch.setattr(summarize, "_native", engine)
        monkeypatch.setattr(summarize, "_slow_noted", True)
        summary, times = summarize.summarize_with_steps(str(path))
        out.append((json.dumps(summary), None if times is None else times._times))
    monkeypatch.undo()
    return out


@pytest.mark.skipif(summarize._native is None, reason="the native engine is not built here")
def test_the_engine_and_its_fallback_give_one_summary(runs, tmp_path, monkeypatch):
    """The engine applies the sampled rules itself (it takes every event of these files: no
    fallback), and SampledSummary, its Python fallback, gives the same bytes: real traces with and
    without node spans, Chrome, gzip, cut off, and hand-made edge cases of each rule."""
    path, header, events = runs["sampled"]
    chrome = tmp_path / "sampled.json"
    body = ",\n".join(json.dumps(e) for e in events)
    chrome.write_text(
        '{"schemaVersion": 1, "sample": %s, "sampleNodeSpans": true, "traceEvents": [\n%s\n]}'
        % (P, body)
    )
    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) * 3 // 5])
    gz = tmp_path / "sampled.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    edges = [
        # depth neither an int nor 0: no settling; stack depths of other types: unknown
        _x("aten::a", 1, 1, "Global", depth=False, stack_depth=10),
        _x("aten::b", 3, 1, "Global", depth=0.0, stack_depth=10.0),
        _x("aten::f", 0.5, 4, "Global", depth=1, stack_depth=10),  # encloses both: still loose
        _x("aten::c", 5, 1, "Global", stack_depth=2000),
        _x("aten::d", 7, 1, "Global", stack_depth=True),
        # a node outside every module; a node of a module, the span carrying a bool or 0 ns
        _x("XBackward0", 10, 2, "Global", phase="backward", **{"Fwd thread id": 1}),
        _x("YBackward0", 13, 2, "M", phase="backward", **{"Fwd thread id": 1}),
        {**_x("nn.Module: M", 12, 4, "M", phase="backward", cat="module_span"), "tid": 9},
        {**_x("nn.Module: M", 12, 4, "M", phase="backward", cat="module_span", node_ns=True)},
        {**_x("nn.Module: M", 12, 4, "M", phase="backward", cat="module_span", node_ns=3000)},
        # a scope of an unknown phase, a collective's work, a wrapper, a step
        _x("nn.Module: M", 20, 3, "M", phase="weird", cat="user_annotation", module_type="M"),
        _x("gloo:all_reduce", 24, 2, "Global", cat="user_annotation", async_work=True),
        _x("autograd::engine::evaluate_function: ZBackward0", 27, 1, "M", phase="backward"),
        _x("ProfilerStep#3", 0, 40, "Global", cat="user_annotation"),
        _x("aten::e", 41, 3, "Global", pid="1", tid=2, stack_depth=100, flops=7),
    ]
    edge = tmp_path / "edges.jsonl"
    edge.write_text(
        "\n".join(
            json.dumps(e)
            for e in [{"ph": "header", "sample": 0.3, "sampleNodeSpans": True}, *edges]
        )
        + "\n"
    )
    for p in [path, runs["nospans"][0], chrome, gz, cut, edge]:
        native, python = _engine_and_fallback(p, monkeypatch)
        assert native == python, p
    # the engine took them: its own pass over the file, no fallback
    for p in [path, chrome, edge]:
        with tracestream.TraceStream(str(p)) as stream:
            h = stream.header
        summary, _ = summarize._summarize_native(
            str(p), None, lambda m: None, (), (sampled.sample_of(h), bool(h["sampleNodeSpans"]))
        )
        assert summary["sample"] == sampled.sample_of(h)
    edge_summary = json.loads(native[0])["modules"]
    assert edge_summary["M"]["backward"]["self_ms"] == 0.003  # the span's node_ns, not the node


def test_every_verb_reads_a_sampled_trace(runs, tmp_path):
    path = runs["sampled"][0]
    for args in (
        ["report", path, "-o", tmp_path / "r.html"],
        ["report", runs["full"][0], path, "-o", tmp_path / "d.html"],
        ["diff", path, path],
        ["top", path, "--once"],
        ["repair", path, "-o", tmp_path / "rep.jsonl"],
        ["summary", path, path],
    ):
        proc = _cli(*args)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    assert "sampled (FQNTRACE_SAMPLE)" in _cli("top", path, "--once").stdout


def test_a_bad_value_is_one_line_and_the_full_trace(tmp_path, run):
    path = tmp_path / "t.jsonl"
    proc = run(
        "import torch\nm = torch.nn.Linear(4, 4)\nm(torch.ones(2, 4)).sum().backward()\n",
        env_extra={"FQNTRACE": str(path), "FQNTRACE_SAMPLE": "2"},
        check_rc=0,
    )
    lines = [line for line in proc.stderr.splitlines() if "FQNTRACE_SAMPLE" in line]
    assert len(lines) == 1 and "is not a probability in (0, 1]; every op is traced" in lines[0]
    header, events = _events(path)
    assert "sample" not in header and _ops(events)


def test_profile_takes_sample(tmp_path, run):
    code = f"""
import fqntrace, torch
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
with fqntrace.profile({str(tmp_path / 't.jsonl')!r}, sample=0.25) as path:
    for _ in range(3):
        m(torch.ones(2, 8)).sum().backward()
try:
    with fqntrace.profile({str(tmp_path / 'u.jsonl')!r}, sample=0):
        pass
except ValueError as e:
    print("refused:", e)
"""
    proc = run(code, check_rc=0)
    assert "refused: fqntrace: sample=0 is not a probability in (0, 1]" in proc.stdout
    header, events = _events(tmp_path / "t.jsonl")
    assert header["sample"] == 0.25
    assert _modules(events)[("Sequential", "forward")] == 3
    assert not (tmp_path / "u.jsonl").exists()


def test_a_compiled_model_sampled_validates_and_summarizes(tmp_path, run):
    # In a compiled graph the submodules' forward runs inside the graph: their backward spans
    # can name them before any of their events (the summary once failed on that: KeyError),
    # and a picked op inside the graph once took the module of an earlier call of its name.
    path = tmp_path / "c.json"
    code = """
import torch, fqntrace
from torch import nn
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(32, 32); self.b = nn.Linear(32, 32)
    def forward(self, x): return self.b(torch.relu(self.a(x)))
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.l1 = Block(); self.l2 = Block()
    def forward(self, x): return self.l2(self.l1(x))
c, x = torch.compile(M()), torch.randn(16, 32)
for _ in range(20):
    c(x).sum().backward()
    fqntrace.step()
"""
    run(code, env_extra={"FQNTRACE": str(path), "FQNTRACE_SAMPLE": "0.3"}, check_rc=0)
    assert _cli("validate", path).returncode == 0
    # The graph calls each of its ops once per Linear: a picked op cannot tell which call it is
    # (the calls not picked never moved the graph's cursor), so it keeps the graph's module.
    with open(path) as f:
        forward = [
            e
            for e in json.load(f)["traceEvents"]
            if e.get("ph") == "X"
            and e.get("cat") == "cpu_op"
            and e["args"].get("phase") == "forward"
            and e["args"]["fqn"].startswith("M")
        ]
    assert len(forward) > 100
    assert {e["args"]["fqn"] for e in forward} == {"M"}
    proc = _cli("summary", path, "--json")
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)["modules"]
    assert modules["M.l1.a"]["backward"]["self_ms"] > 0  # its nodes, through its span
    assert _cli("summary", path).returncode == 0


def _x(name, ts, dur, fqn, phase="forward", depth=0, cat="cpu_op", tid=1, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"fqn": fqn, "phase": phase, "depth": depth, **args},
    }


def test_the_rules_on_a_hand_made_trace():
    """Forward: a scope's own wall time; backward: the spans' node time, and a Global node's own;
    outside everything: sampled ops at dur/p, nested ones (by stack depth, or inside a sampled
    op) not counted again; the optimizer's scope by its wall time."""
    p = 0.1
    events = [
        # forward (end order): M.a inside M
        _x("aten::mm", 12, 2, "M.a", depth=2),
        _x("nn.Module: M.a", 10, 5, "M.a", depth=1, cat="user_annotation", module_type="A"),
        _x("nn.Module: M", 5, 20, "M", cat="user_annotation", module_type="M"),
        # the loss, outside every module: one op the program called, its nested op sampled
        # (deeper on the stack), and an op inside it sampled too (enclosed: not counted again)
        _x("aten::_log_softmax", 30, 3, "Global", stack_depth=6480),
        _x("aten::x", 41, 1, "Global", depth=1),
        _x("aten::cross_entropy_loss", 40, 4, "Global", stack_depth=5360),
        # backward: a Global node written, module nodes through the span
        _x("NllLossBackward0", 50, 2, "Global", phase="backward", **{"Fwd thread id": 1}),
        _x("MmBackward0", 60, 3, "M.a", phase="backward", **{"Fwd thread id": 1}),
        {
            "ph": "X",
            "cat": "module_span",
            "name": "nn.Module: M.a",
            "pid": 1,
            "tid": 99,
            "ts": 55,
            "dur": 10,
            "args": {
                "fqn": "M.a",
                "phase": "backward",
                "module_type": "A",
                "node_ns": 7000,
                "depth": 1,
            },
        },
        # the optimizer: a user scope outside every module, with an op inside
        _x("aten::add_", 71, 1, "Global", depth=1),
        _x("Optimizer.step#SGD.step", 70, 6, "Global", cat="user_annotation"),
    ]
    acc = sampled.SampledSummary(p, node_spans=True)
    for e in events:
        acc.add(e)
    out = acc.result({"sample": p}, {}, False, "x")
    m = out["modules"]
    assert m["M.a"]["forward"]["self_ms"] == 0.005
    assert m["M"]["forward"]["self_ms"] == 0.015  # 20 less M.a's 5
    assert m["M.a"]["backward"]["self_ms"] == 0.007  # the span's node_ns, not the node's 3 us
    # Global forward: the loss op at 4/p = 40 us, the optimizer's scope 6 us
    assert m["Global"]["forward"]["self_ms"] == pytest.approx(0.046)
    assert m["Global"]["backward"]["self_ms"] == 0.002
    assert m["Global"]["forward"]["estimate_ci_ms"] > 0
    assert "estimate_ci_ms" not in m["M"]["forward"]
    assert out["sample"] == p
    # memory stays bounded: an outermost range leaves nothing behind on its thread
    assert all(not t.walls and not t.nodes for t in acc.threads.values())
