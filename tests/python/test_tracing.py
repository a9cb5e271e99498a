"""End-to-end tracing from Python: no code change, load_library alone, profile(), exits."""

import json

import pytest
from conftest import load_trace, slices

MODEL = """
import torch
class Foo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.ModuleDict({"nest": torch.nn.Linear(4, 4)})
        self.c = torch.nn.ModuleList([torch.nn.Linear(4, 4)])
    def forward(self, x):
        return self.b["nest"](self.a(self.c[0](x))).relu()
m = Foo()
for _ in range(2):
    m(torch.randn(3, 4)).sum().backward()
"""


def module_fqns(trace):
    return {e["args"]["fqn"] for e in slices(trace) if "module_type" in e["args"]}


def fqn_by_node(trace, name):
    return sorted(e["args"]["fqn"] for e in slices(trace) if e["name"] == name)


# FQNTRACE set, program unchanged: ops carry ModTracker-style fqns, forward and backward.
def test_no_code_change_traces_module_fqns(run, tmp_path):
    path = tmp_path / "t.json"
    proc = run(MODEL, {"FQNTRACE": str(path)}, check_rc=0)
    assert proc.stderr == ""
    trace = load_trace(path)
    assert module_fqns(trace) == {"Foo", "Foo.a", "Foo.b.nest", "Foo.c.0"}
    assert fqn_by_node(trace, "AddmmBackward0") == sorted(["Foo.a", "Foo.b.nest", "Foo.c.0"] * 2)
    fwd = [e for e in slices(trace) if e["name"] == "aten::addmm"]
    assert sorted(e["args"]["fqn"] for e in fwd) == sorted(["Foo.a", "Foo.b.nest", "Foo.c.0"] * 2)
    assert all(e["args"]["phase"] == "forward" for e in fwd)
    acc = [e for e in slices(trace) if e["name"] == "torch::autograd::AccumulateGrad"]
    assert sorted(e["args"]["fqn"] for e in acc) == sorted(["Foo.a", "Foo.b.nest", "Foo.c.0"] * 4)
    assert trace["fqntrace"]["complete"] is True
    assert trace["distributedInfo"] == {"backend": None, "rank": 0, "world_size": 1}


# torch.ops.load_library alone (no import of fqntrace) also gives module fqns.
def test_load_library_alone_gives_module_fqns(run, tmp_path):
    import fqntrace

    path = tmp_path / "t.json"
    code = f"import torch\ntorch.ops.load_library({fqntrace.library_path()!r})\n" + MODEL.replace(
        "import torch\n", "", 1
    )
    # The start-up hook is told to stay out of it, so only the library can start anything.
    env = {"FQNTRACE": str(path), "FQNTRACE_AUTOSTART": "0"}
    proc = run(code, env, check_rc=0)
    assert proc.stderr == ""
    trace = load_trace(path)
    assert module_fqns(trace) == {"Foo", "Foo.a", "Foo.b.nest", "Foo.c.0"}
    assert fqn_by_node(trace, "AddmmBackward0") == sorted(["Foo.a", "Foo.b.nest", "Foo.c.0"] * 2)


@pytest.mark.parametrize("ending", ["sys.exit(7)", "raise ValueError('boom')", "pass"])
def test_trace_is_valid_json_after_any_normal_exit(run, tmp_path, ending):
    path = tmp_path / "t.json"
    proc = run(MODEL + "\nimport sys\n" + ending + "\n", {"FQNTRACE": str(path)})
    assert proc.returncode == {"sys.exit(7)": 7, "pass": 0}.get(ending, 1)
    trace = load_trace(path)
    assert trace["fqntrace"]["complete"] is True
    assert any(e["name"] == "aten::addmm" for e in slices(trace))


def test_unset_or_empty_installs_nothing(run):
    code = "import torch, fqntrace\nfrom fqntrace import _native\nprint(_native.load().running())"
    for env in ({}, {"FQNTRACE": ""}):
        proc = run(code, env, check_rc=0)
        assert proc.stdout.strip() == "False"
        assert proc.stderr == ""


@pytest.mark.parametrize(
    "value", ["{tmp}", "{tmp}/missing/t.json", "{tmp}/t.txt", "{tmp}/t.{{x}}.json"]
)
def test_bad_value_warns_once_and_keeps_exit_code(run, tmp_path, value):
    value = value.format(tmp=tmp_path)
    proc = run(MODEL + "\nimport sys\nsys.exit(4)\n", {"FQNTRACE": value})
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "FQNTRACE" in lines[0] and "tracing is off" in lines[0], proc.stderr


# The Chrome trace streams one event per line and is flushed while the program runs.
def test_trace_is_flushed_while_running(run, tmp_path):
    path = tmp_path / "t.json"
    code = (
        MODEL
        + f"""
import json, time
time.sleep(1.2)
text = open({str(path)!r}).read()  # what reached the file while the program runs
lines = text.splitlines()
assert lines[0].startswith('{{"schemaVersion": 1, "distributedInfo": {{"backend": null'), lines[0]
for line in lines[1:]:
    json.loads(line.rstrip(","))
print(text.count('"aten::addmm"'))
import os
os._exit(0)   # skips atexit; fqntrace still finishes the file (docs/reliability.md)
"""
    )
    proc = run(code, {"FQNTRACE": str(path)}, check_rc=0)
    assert int(proc.stdout.strip()) == 6, proc.stderr
    assert json.loads(path.read_text())["fqntrace"]["complete"] is True


def test_profile_context_manager(tmp_path):
    import fqntrace
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with fqntrace.profile(str(tmp_path / "p.jsonl")) as path:
        model(torch.randn(2, 3)).sum().backward()
    lines = [json.loads(line) for line in open(path)]
    assert lines[0]["ph"] == "header" and lines[-1]["ph"] == "footer"
    events = [e for e in lines if e.get("ph") == "X"]
    assert {e["args"]["fqn"] for e in events if "module_type" in e["args"]} == {
        "Sequential",
        "Sequential.0",
        "Sequential.1",
        "Sequential.2",
    }
    assert {e["args"]["fqn"] for e in events if e["name"] == "AddmmBackward0"} == {
        "Sequential.0",
        "Sequential.2",
    }
    with pytest.raises(ValueError, match="unknown placeholder"):
        with fqntrace.profile(str(tmp_path / "{nope}.json")):
            pass


# Activation checkpointing: the re-run forward is tagged recompute under the right module.
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recompute_is_tagged(tmp_path, reentrant):
    import fqntrace
    import torch
    from torch.utils.checkpoint import checkpoint

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))

        def forward(self, x):
            x = self.blocks[0](x).relu()
            return checkpoint(self.blocks[1], x, use_reentrant=reentrant)

    net = Net()
    x = torch.randn(2, 4, requires_grad=True)
    with fqntrace.profile(str(tmp_path / "ac.json")) as path:
        net(x).sum().backward()
    events = slices(load_trace(path))
    recompute = [e for e in events if e["args"]["phase"] == "recompute"]
    assert recompute, "no recompute events"
    assert {e["args"]["fqn"] for e in recompute} == {"Net.blocks.1"}
    assert any(e["name"] == "aten::addmm" for e in recompute)
    fwd_addmm = [
        e for e in events if e["name"] == "aten::addmm" and e["args"]["phase"] == "forward"
    ]
    assert sorted(e["args"]["fqn"] for e in fwd_addmm) == ["Net.blocks.0", "Net.blocks.1"]
    bwd = {e["args"]["fqn"] for e in events if e["name"] == "AddmmBackward0"}
    assert bwd == {"Net.blocks.0", "Net.blocks.1"}


# A record_function opened in forward and still open while backward runs (a "step" range): what
# the engine runs outside any node (a final callback here) is backward, not the range's forward.
def test_engine_callbacks_inside_a_forward_scope_are_backward(tmp_path):
    import fqntrace
    import torch
    from torch.autograd import Variable

    model = torch.nn.Linear(3, 3)
    marker = torch.ones(2)

    def final_callback():
        with torch.autograd.profiler.record_function("final callback"):
            marker.mul(3)
        marker.mul(5)

    def hook(grad):
        Variable._execution_engine.queue_callback(final_callback)
        return grad

    with fqntrace.profile(str(tmp_path / "cb.json")) as path:
        with torch.autograd.profiler.record_function("step"):
            out = model(torch.randn(2, 3))
            out.register_hook(hook)
            out.sum().backward()
            marker.mul(7)  # after backward: forward again
    events = slices(load_trace(path))
    phase = {(e["name"], e["args"].get("fqn")): e["args"]["phase"] for e in events}
    assert phase[("step", "Global")] == "forward"
    assert phase[("final callback", "Global")] == "backward"
    muls = sorted((e["ts"], e["args"]["phase"]) for e in events if e["name"] == "aten::mul")
    assert [p for _, p in muls] == ["backward", "backward", "forward"]
    assert phase[("aten::addmm", "Linear")] == "forward"


# FQNTRACE_SHAPES=1 adds Kineto's Input Dims / Input type; off by default.
def test_shapes_are_opt_in(run, tmp_path):
    code = "import torch\nlin = torch.nn.Linear(4, 3)\nlin(torch.randn(5, 4)).sum().backward()\n"
    on, off = tmp_path / "on.json", tmp_path / "off.json"
    run(code, {"FQNTRACE": str(on), "FQNTRACE_SHAPES": "1"}, check_rc=0)
    run(code, {"FQNTRACE": str(off)}, check_rc=0)
    on_events, off_events = slices(load_trace(on)), slices(load_trace(off))
    assert not any("Input Dims" in e["args"] for e in off_events)
    addmm = [e for e in on_events if e["name"] == "aten::addmm"]
    assert addmm[0]["args"]["Input Dims"] == [[3], [5, 4], [4, 3], [], []]
    assert addmm[0]["args"]["Input type"] == ["float", "float", "float", "Scalar", "Scalar"]
    assert addmm[0]["args"]["flops"] == 2 * 5 * 4 * 3
    ops = [e for e in on_events if e["cat"] == "cpu_op" and "Fwd thread id" not in e["args"]]
    assert all("Input Dims" in e["args"] for e in ops)

    # The same ranges; the backward module spans (cat module_span) are a view the drain builds
    # from timing (a stretch splits at a 1 ms pause: a preempted run has one more), not ranges.
    def ranges(events):
        return sorted(e["name"] for e in events if e["cat"] != "module_span")

    assert ranges(on_events) == ranges(off_events)


# A forked child (DataLoader workers, multiprocessing) never writes the parent's file, even when
# it runs ops and exits through the normal exit path.
def test_forked_child_leaves_parent_trace_intact(run, tmp_path):
    path = tmp_path / "t.json"
    code = (
        MODEL
        + """
import os, sys
pid = os.fork()
if pid == 0:
    for _ in range(50):
        m(torch.randn(3, 4)).sum().backward()
    sys.exit(0)
os.waitpid(pid, 0)
m(torch.randn(3, 4)).sum().backward()
"""
    )
    proc = run(code, {"FQNTRACE": str(path)}, check_rc=0)
    assert proc.stderr == ""
    trace = load_trace(path)
    assert trace["fqntrace"]["complete"] is True
    assert {e["pid"] for e in slices(trace)} == {trace["traceEvents"][0]["pid"]}
    assert len([e for e in slices(trace) if e["name"] == "AddmmBackward0"]) == 3 * 3


# A burst of tiny ops far larger than one thread's buffer: every op is written, or counted as
# dropped, and the program is told how many. Whether the drain keeps up is a matter of CPU: it
# runs niced (plugin/session.cpp), and beside another test on 2 cores it once fell 24,526 events
# behind (the compatibility tier, 2026-12-05); its speed is the benchmarks' (P7, docs/benchmarks.md).
def test_burst_of_tiny_ops_is_written_or_counted(run, tmp_path):
    path = tmp_path / "burst.json"
    code = "import torch\na = torch.ones(4)\nfor _ in range(300000):\n    torch.add(a, a)\n"
    proc = run(code, {"FQNTRACE": str(path)}, check_rc=0)
    trace = load_trace(path)
    dropped = trace["fqntrace"]["dropped_events"]
    assert sum(1 for e in slices(trace) if e["name"] == "aten::add") + dropped == 300000
    assert trace["fqntrace"]["complete"] is True
    if dropped:
        assert proc.stderr == (
            f"fqntrace: dropped {dropped} events because the writer fell behind; the trace says "
            "so in fqntrace.dropped_events.\n"
        )
    else:
        assert proc.stderr == ""


# The drain thread runs 5 nice levels below the process (busy nodes: the program's threads first).
def test_drain_thread_runs_at_lower_priority(run, tmp_path):
    code = """
import os, time, torch, fqntrace
assert fqntrace.tracing()
torch.ones(2).add(1)
deadline = time.monotonic() + 30  # the drain thread names itself once it first runs
while time.monotonic() < deadline:
    tids = [int(t) for t in os.listdir("/proc/self/task")
            if open(f"/proc/self/task/{t}/comm").read().strip() == "fqntrace-drain"]
    if tids:
        break
    time.sleep(0.01)
print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, tids[0]))
"""
    proc = run(code, {"FQNTRACE": str(tmp_path / "t.json")}, check_rc=0)
    process_nice, drain_nice = map(int, proc.stdout.split())
    assert drain_nice == min(19, process_nice + 5)
