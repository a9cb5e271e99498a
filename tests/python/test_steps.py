"""Training steps: optimizer steps become ProfilerStep#N ranges with no code change (HTA reads
them), FQNTRACE_STEPS / profile(steps=...) record only the chosen steps, a bad value warns once
and traces every step, and the summary reports per-step medians."""

import json
import re
import subprocess
import sys

import pytest
from conftest import run_python, slices

STEP = re.compile(r"^ProfilerStep#(\d+)$")
STEP_TRACK_TID = 0x7FFFFFF0  # plugin/steps.h

PLAIN_LOOP = """
import sys, torch
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 1)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for i in range(int(sys.argv[1])):
    with torch.profiler.record_function(f"iteration {i}"):
        loss = model(torch.randn(4, 16)).sum()
        opt.zero_grad()
        loss.backward()
    opt.step()
"""

# As HF Trainer runs it: accelerate's AcceleratedOptimizer is a torch Optimizer subclass that
# never calls Optimizer.__init__ and whose step() calls the wrapped optimizer's step().
HF_LOOP = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
model = LlamaForCausalLM(config)
model.gradient_checkpointing_enable()
model.train()

class WrappedOptimizer(torch.optim.Optimizer):
    def __init__(self, optimizer):
        self.optimizer = optimizer
    @property
    def param_groups(self):
        return self.optimizer.param_groups
    def zero_grad(self, set_to_none=None):
        self.optimizer.zero_grad()
    def step(self, closure=None):
        self.optimizer.step(closure)

opt = WrappedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
ids = torch.randint(0, 64, (2, 16))
for _ in range(3):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
"""

STEP_CALLS = """
import sys, torch, fqntrace
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 1)
    def forward(self, x):
        return self.fc2(self.fc1(x))
model = Net()
with fqntrace.profile(sys.argv[1], steps=sys.argv[2]):
    for i in range(7):
        with torch.profiler.record_function(f"iteration {i}"):
            model(torch.randn(2, 8)).sum().backward()
        fqntrace.step()
"""


def _run_script(code, args, env_extra, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(code)
    return run_python(
        f"import runpy, sys; sys.argv = {[str(script)] + list(args)!r}; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')",
        env_extra=env_extra,
        check_rc=0,
    )


def _steps(events):
    """{step: (start_us, end_us, event)} of the ProfilerStep ranges."""
    out = {}
    for e in events:
        m = STEP.match(e["name"])
        if m:
            assert e["cat"] == "user_annotation"
            out[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"], e)
    return out


def _inside(e, start, end):
    return start - 0.001 <= e["ts"] and e["ts"] + e["dur"] <= end + 0.001


def test_optimizer_steps_end_profiler_steps_that_hta_reads(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    path = trace_dir / "rank0.json"
    _run_script(PLAIN_LOOP, ["4"], {"FQNTRACE": str(path)}, tmp_path)
    events = slices(json.load(open(path)))
    steps = _steps(events)
    assert sorted(steps) == [0, 1, 2, 3]
    spans = sorted(steps.values())
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end <= start + 0.001  # one after the other
    optimizer = [e for e in events if e["name"] == "Optimizer.step#AdamW.step"]
    iterations = [e for e in events if e["name"].startswith("iteration ")]
    assert len(optimizer) == 4 and len(iterations) == 4
    for n, (start, end, step) in steps.items():
        # Each step holds its iteration and its optimizer step whole, on the steps' own track:
        # the step ends where the optimizer's range ends.
        assert step["tid"] == STEP_TRACK_TID
        assert _inside(optimizer[n], start, end), (n, optimizer[n], step)
        assert abs(optimizer[n]["ts"] + optimizer[n]["dur"] - end) < 0.002
        mine = [e for e in iterations if _inside(e, start, end)]
        assert [e["name"] for e in mine] == [f"iteration {n}"]
        fc1 = [e for e in events if e["name"] == "aten::addmm" and _inside(e, start, end)]
        assert {e["args"]["fqn"] for e in fc1} == {"Net.fc1", "Net.fc2"}

    # HTA leaves out the last step unless told (Kineto's last step is usually cut short).
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir), include_last_profiler_step=True)
    assert analysis.get_profiler_steps() == [0, 1, 2, 3]
    frame = analysis.t.get_trace(0)
    sym = analysis.t.symbol_table.get_sym_id_map()
    addmm = frame[frame["name"] == sym["aten::addmm"]]
    # HTA's per-step view: every forward addmm (2 per step) is in its own iteration.
    assert sorted(addmm["iteration"].value_counts().items()) == [(0, 2), (1, 2), (2, 2), (3, 2)]


def test_hf_style_wrapped_optimizer_with_checkpointing_ends_steps(tmp_path):
    pytest.importorskip("transformers")
    path = tmp_path / "hf.json"
    _run_script(HF_LOOP, [], {"FQNTRACE": str(path)}, tmp_path)
    events = slices(json.load(open(path)))
    steps = _steps(events)
    assert sorted(steps) == [0, 1, 2]
    for start, end, _ in steps.values():
        recompute = [
            e for e in events if e["args"].get("phase") == "recompute" and _inside(e, start, end)
        ]
        assert recompute, "gradient checkpointing re-runs layers inside every step"


def test_step_window_records_exactly_steps_3_and_4(tmp_path):
    path = tmp_path / "window.json"
    _run_script(PLAIN_LOOP, ["7"], {"FQNTRACE": str(path), "FQNTRACE_STEPS": "3:5"}, tmp_path)
    events = slices(json.load(open(path)))
    steps = _steps(events)
    assert sorted(steps) == [3, 4]
    assert sorted(e["name"] for e in events if e["name"].startswith("iteration ")) == [
        "iteration 3",
        "iteration 4",
    ]
    first = min(s for s, _, _ in steps.values())
    last = max(e for _, e, _ in steps.values())
    ops = [e for e in events if e["cat"] == "cpu_op"]
    assert ops
    for e in ops:  # nothing of another step
        assert first - 0.001 <= e["ts"] <= last + 0.001, e
    # Module names stay right although the modules' hooks ran untraced before the window.
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert sorted(e["args"]["fqn"] for e in addmm) == ["Net.fc1", "Net.fc1", "Net.fc2", "Net.fc2"]
    spans = {e["name"] for e in events if e["name"].startswith("nn.Module: ")}
    assert spans == {"nn.Module: Net", "nn.Module: Net.fc1", "nn.Module: Net.fc2"}


def test_profile_steps_with_explicit_step_calls_and_a_period(tmp_path):
    path = tmp_path / "explicit.json"
    _run_script(STEP_CALLS, [str(path), "1:2:3"], {}, tmp_path)  # steps 1, 4 of 0..6
    events = slices(json.load(open(path)))
    assert sorted(_steps(events)) == [1, 4]
    assert sorted(e["name"] for e in events if e["name"].startswith("iteration ")) == [
        "iteration 1",
        "iteration 4",
    ]
    node_fqns = {e["args"]["fqn"] for e in events if e["name"] == "AddmmBackward0"}
    assert node_fqns == {"Net.fc1", "Net.fc2"}


def test_profile_rejects_bad_steps():
    proc = run_python(
        "import fqntrace\n"
        "try:\n"
        "    with fqntrace.profile('/tmp/never.json', steps='5:3'):\n"
        "        pass\n"
        "except ValueError as e:\n"
        "    print('ValueError', e)\n",
        check_rc=0,
    )
    assert proc.stdout.startswith("ValueError fqntrace: steps=5:3"), proc.stdout


@pytest.mark.parametrize(
    "value", ["abc", "5:3", "3", "3:5:4", "1:2:0", "-1:3", ":5", "3:", "1:2:3:4", "3-5"]
)
def test_bad_step_window_warns_once_and_traces_every_step(tmp_path, value):
    path = tmp_path / "bad.json"
    proc = _run_script(
        PLAIN_LOOP, ["3"], {"FQNTRACE": str(path), "FQNTRACE_STEPS": value}, tmp_path
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"fqntrace: FQNTRACE_STEPS={value}: ")
    assert "every step is traced" in lines[0]
    assert sorted(_steps(slices(json.load(open(path))))) == [0, 1, 2]


def test_summary_reports_per_step_medians_without_step_0(tmp_path):
    path = tmp_path / "demo.json"
    env = {"FQNTRACE": str(path), "FQNTRACE_FORMATS": "summary", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", "4", "--layers", "2"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )

    def summary(*extra):
        proc = subprocess.run(
            [sys.executable, "-m", "fqntrace", "summary", "--json", str(path), *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    default = summary()
    steps = default["steps"]
    assert steps["recorded"] == 4 and steps["count"] == 3 and steps["excluded"] == [0]
    per = {s["step"]: s for s in steps["per_step"]}
    kept_ms = sorted(per[s]["ms"] for s in (1, 2, 3))
    assert steps["median_ms"] == pytest.approx(kept_ms[1], abs=1e-6)
    assert steps["min_ms"] == pytest.approx(kept_ms[0], abs=1e-6)
    assert steps["max_ms"] == pytest.approx(kept_ms[2], abs=1e-6)
    block = default["modules"]["TinyTransformer.layers.0"]["forward"]
    assert 0 < block["step_median_ms"] <= block["total_ms"]
    # The summary file written at exit carries the same per-step numbers.
    exported = json.load(open(tmp_path / "demo.summary.json"))
    for key in ("count", "recorded", "excluded"):
        assert exported["steps"][key] == steps[key]
    for key in ("median_ms", "min_ms", "max_ms", "mad_ms", "median_op_ms"):
        assert exported["steps"][key] == pytest.approx(steps[key], abs=1e-5), key
    for fqn, m in default["modules"].items():
        for phase in ("forward", "backward", "recompute"):
            for key in ("step_median_ms", "step_self_median_ms"):
                assert exported["modules"][fqn][phase][key] == pytest.approx(
                    m[phase][key], abs=1e-5
                ), (fqn, phase, key)
        # ... and the samples `diff` tests: own time per kept step, all phases.
        assert exported["modules"][fqn]["step_self_ms"] == pytest.approx(
            m["step_self_ms"], abs=1e-5
        ), fqn
        # ... and the spread `summary` flags noisy modules by.
        if m["step_spread_pct"] is None:
            assert exported["modules"][fqn]["step_spread_pct"] is None, fqn
        else:
            assert exported["modules"][fqn]["step_spread_pct"] == pytest.approx(
                m["step_spread_pct"], abs=0.01
            ), fqn
        assert exported["modules"][fqn]["noisy"] == m["noisy"], fqn
    assert exported["steps"]["kept"] == steps["kept"] == [1, 2, 3]
    # The existing keys keep covering the whole trace.
    everything = summary("--exclude-steps", "none")
    assert everything["steps"]["count"] == 4
    assert (
        everything["modules"]["TinyTransformer.layers.0"]["forward"]["total_ms"]
        == block["total_ms"]
    )
    table = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert table.returncode == 0, table.stderr
    assert "3 steps, median " in table.stdout and "left out: step 0" in table.stdout
    assert "fwd ms/st" in table.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", str(path), "--exclude-steps", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


EXPLICIT_WITH_OPTIMIZER = """
import sys, torch, fqntrace
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(6):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    if i % 2 == 1:
        fqntrace.step()  # the program's own boundaries: every two optimizer steps
print(fqntrace.current_step())
"""


def test_explicit_step_calls_replace_the_optimizer_hook(tmp_path):
    path = tmp_path / "explicit.json"
    proc = _run_script(EXPLICIT_WITH_OPTIMIZER, [], {"FQNTRACE": str(path)}, tmp_path)
    # Until the program's first fqntrace.step() the optimizer's steps end steps (0 and 1);
    # from then on only its calls do (2, 3, 4): 3 calls, never an optimizer step counted twice.
    assert proc.stdout.split() == ["5"]
    assert sorted(_steps(slices(json.load(open(path))))) == [0, 1, 2, 3, 4]


TWO_SESSIONS = """
import sys, torch, fqntrace
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with fqntrace.profile(sys.argv[1]):
    for _ in range(2):
        model(torch.randn(2, 4)).sum().backward()
        fqntrace.step()  # this session's own boundaries
with fqntrace.profile(sys.argv[2]):
    for _ in range(3):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()  # the next session: no step() call, so the optimizer ends steps again
"""


def test_an_explicit_step_call_lasts_one_session(tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    _run_script(TWO_SESSIONS, [str(first), str(second)], {}, tmp_path)
    assert sorted(_steps(slices(json.load(open(first))))) == [0, 1]
    assert sorted(_steps(slices(json.load(open(second))))) == [0, 1, 2]
