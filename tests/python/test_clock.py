"""Timestamps: whichever clock the callbacks read (the TSC where the kernel trusts it, or
CLOCK_MONOTONIC with FQNTRACE_CLOCK=monotonic), the trace is in real microseconds and every
backward node's flow starts exactly at the forward op that created it."""

import json

import pytest
from conftest import load_trace, slices

# Two marked ranges 0.3 s apart, around a small training step. The program reads its own clock
# just before and just after each mark opens: the trace's gap must fall between those readings.
CODE = """
import time, torch
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
before_a = time.monotonic()
with torch.autograd.profiler.record_function("mark_a"):
    after_a = time.monotonic()
for _ in range(3):
    m(torch.randn(4, 8)).sum().backward()
while time.monotonic() - after_a < 0.3:
    time.sleep(0.01)
before_b = time.monotonic()
with torch.autograd.profiler.record_function("mark_b"):
    after_b = time.monotonic()
print(before_b - after_a, after_b - before_a)
"""


@pytest.mark.parametrize("clock", ["auto", "monotonic"])
def test_times_are_real_and_flows_start_at_their_forward_op(run, tmp_path, clock):
    path = tmp_path / "t.json"
    proc = run(CODE, {"FQNTRACE": str(path), "FQNTRACE_CLOCK": clock}, check_rc=0)
    assert proc.stderr == ""
    trace = load_trace(path)
    events = slices(trace)
    [a] = [e for e in events if e["name"] == "mark_a"]
    [b] = [e for e in events if e["name"] == "mark_b"]
    shortest_s, longest_s = map(float, proc.stdout.split())
    # Each mark opened between the program's two readings around it (a preempted process
    # widens the bracket, never moves it): the trace's gap is within it, to 0.5 ms.
    gap_s = (b["ts"] - a["ts"]) / 1e6
    assert shortest_s - 0.0005 <= gap_s <= longest_s + 0.0005, (gap_s, shortest_s, longest_s)
    starts = {(e["tid"], e["ts"]) for e in events}
    flows = [e for e in trace["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "fwdbwd"]
    assert len(flows) >= 3 * 2  # two Linear layers' addmm per step
    for s in flows:
        assert (s["tid"], s["ts"]) in starts, s
    # Within a thread, a slice ends no later than its enclosing slice.
    by_tid = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid_events in by_tid.values():
        tid_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in tid_events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 0.002, (
                    e,
                    stack[-1],
                )
            stack.append(e)


def test_bad_clock_value_warns_and_keeps_the_default_clock(run, tmp_path):
    path = tmp_path / "t.json"
    proc = run(
        "import torch\ntorch.ones(2) + 1\n",
        {"FQNTRACE": str(path), "FQNTRACE_CLOCK": "x"},
        check_rc=0,
    )
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "FQNTRACE_CLOCK=x" in proc.stderr and "monotonic" in proc.stderr, proc.stderr
    trace = json.load(open(path))
    assert trace["fqntrace"]["complete"] is True
    assert any(e.get("name") == "aten::add" for e in trace["traceEvents"])
