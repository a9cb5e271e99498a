"""The thread CPU time per module (plugin/thread_cpu.h, `self_cpu_ns`; opt-in: FQNTRACE_CPU=1 or
profile(cpu=True)): what the trace carries, what `summary` makes of it (native engine and Python
alike) and what `diff` tests when it is there.

A module that sleeps stands for a thread waiting for a core: its wall time grows, its CPU time
does not. A module that spins on the CPU in Python has CPU time close to its wall time."""

import json
import os
import statistics
import subprocess
import sys
import time

import fqntrace
import pytest
import torch
from conftest import load_trace, slices
from fqntrace.analysis import cli, diff, summarize, whole_file
from torch import nn

STEPS = 8
SLEEP_MS = 6.0
SPIN_MS = 3.0


def spin(ms):
    """CPU work in this thread for ms milliseconds of its CPU time."""
    end = time.thread_time_ns() + int(ms * 1e6)
    while time.thread_time_ns() < end:
        pass


class Sleeps(nn.Module):
    def forward(self, x):
        time.sleep(SLEEP_MS / 1000)
        return x * 1


class Spins(nn.Module):
    def __init__(self, ms):
        super().__init__()
        self.ms = ms

    def forward(self, x):
        spin(self.ms)
        return x * 1


class Outer(nn.Module):
    def __init__(self, spin_ms=SPIN_MS):
        super().__init__()
        self.sleeps = Sleeps()
        self.spins = Spins(spin_ms)
        self.lin = nn.Linear(64, 64)

    def forward(self, x):
        return self.lin(self.spins(self.sleeps(x)))


def train(path, spin_ms=SPIN_MS, steps=STEPS, cpu=True):
    torch.manual_seed(0)
    model = Outer(spin_ms)
    x = torch.randn(32, 64)
    model(x).sum().backward()  # untraced warm-up
    with fqntrace.profile(str(path), cpu=cpu):
        for _ in range(steps):
            model(x).sum().backward()
            fqntrace.step()
    return str(path)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    torch.set_num_threads(1)
    return train(tmp_path_factory.mktemp("cpu") / "run.json")


def test_modules_and_outermost_backward_ops_carry_their_own_cpu_time(traced):
    events = slices(load_trace(traced))
    modules = [e for e in events if "module_type" in e["args"] and e["cat"] == "user_annotation"]
    assert modules and all("self_cpu_ns" in e["args"] for e in modules)
    backward_tops = [
        e
        for e in events
        if e["cat"] == "cpu_op" and e["args"]["phase"] == "backward" and e["args"]["depth"] == 0
    ]
    assert backward_tops and all("self_cpu_ns" in e["args"] for e in backward_tops)
    # Forward ops and nested backward ops read no clock.
    assert not any(
        "self_cpu_ns" in e["args"]
        for e in events
        if e["cat"] == "cpu_op" and e["args"]["phase"] == "forward"
    )
    sleeps = [e for e in modules if e["args"]["fqn"] == "Outer.sleeps"]
    spins = [e for e in modules if e["args"]["fqn"] == "Outer.spins"]
    outer = [e for e in modules if e["args"]["fqn"] == "Outer"]
    cpu_us = lambda e: e["args"]["self_cpu_ns"] / 1000  # noqa: E731 (dur is in us)
    assert all(isinstance(e["args"]["self_cpu_ns"], int) for e in modules + backward_tops)
    # Waiting is wall time only. A sleep still costs this VM's kernel some CPU time on the thread
    # (a plain `time.sleep(0.006)` measured 30-300 us of it here), more in a first call: the
    # median, not every call.
    for e in sleeps:
        assert e["dur"] >= SLEEP_MS * 1000 * 0.9
        assert cpu_us(e) < e["dur"], e
    assert statistics.median(cpu_us(e) for e in sleeps) < 0.25 * SLEEP_MS * 1000, sleeps
    for e in spins:  # spinning is CPU time, about all of its wall time
        assert cpu_us(e) >= SPIN_MS * 1000 * 0.95, e
        assert cpu_us(e) <= e["dur"] * 1.05 + 20, e
    for e in outer:  # the parent's own code only: its children's CPU time is theirs
        assert cpu_us(e) < 0.5 * SPIN_MS * 1000, e
    assert (
        subprocess.run(
            [sys.executable, "-m", "fqntrace", "validate", traced], capture_output=True
        ).returncode
        == 0
    )


def test_summary_gives_cpu_time_per_module_and_step_the_same_natively_and_in_python(traced):
    native = summarize.load_for_summary(traced)
    python = summarize.summarize(whole_file.load(traced))
    assert native["modules"] == python["modules"]
    assert native["steps"] == python["steps"]
    m = native["modules"]
    kept = native["steps"]["kept"]
    assert len(kept) == STEPS - 1
    spins, sleeps, outer = m["Outer.spins"], m["Outer.sleeps"], m["Outer"]
    assert len(spins["step_self_cpu_ms"]) == len(kept)
    assert min(spins["step_self_cpu_ms"]) >= SPIN_MS * 0.95
    assert statistics.median(sleeps["step_self_cpu_ms"]) < SLEEP_MS * 0.25
    # Subtree: Outer's forward CPU time holds its children's; its own does not.
    fwd = outer["forward"]
    assert fwd["step_cpu_median_ms"] >= spins["forward"]["step_cpu_median_ms"]
    assert fwd["step_self_cpu_median_ms"] < SPIN_MS * 0.5
    assert fwd["cpu_ms"] == pytest.approx(
        sum(
            m[f]["forward"]["self_cpu_ms"]
            for f in ("Outer", "Outer.spins", "Outer.sleeps", "Outer.lin")
        ),
        abs=1e-5,
    )
    assert m["Outer.lin"]["backward"]["self_cpu_ms"] > 0
    assert all(r["cpu_ms"] > 0 for r in native["steps"]["per_step"])


def test_summary_table_shows_the_cpu_column(traced, capsys):
    assert cli.main(["summary", traced]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("module"))
    at = header.index("cpu ms/st")  # right-aligned under its header, as wide
    row = next(line for line in out.splitlines() if line.strip().startswith("spins"))
    assert float(row[at : at + len("cpu ms/st")]) >= SPIN_MS * 0.95
    assert "cpu ms/st: the thread's CPU time" in out


def gate(base, new, *extra):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fqntrace",
            "diff",
            base,
            new,
            "--threshold",
            "10",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    return out.returncode, json.loads(out.stdout)


def test_diff_tests_cpu_time_and_names_the_module_with_more_cpu_work(tmp_path, traced):
    slow = train(tmp_path / "slow.json", spin_ms=SPIN_MS * 1.6)
    code, result = gate(traced, slow)
    assert code == diff.EXIT_REGRESSION, result
    assert result["measure"].startswith("cpu_")
    # The module with more CPU work fails the gate, ranked first. (Under two CI runs at once on
    # the 2 cores, Outer.lin, a few tens of us per step, once failed it beside it.)
    assert "Outer.spins" in result["regressions"]
    row = result["rows"][0]
    assert row["fqn"] == "Outer.spins" and row["measure"].startswith("cpu_")
    assert row["cpu_ms"][1] > row["cpu_ms"][0] * 1.4
    global_row = next(r for r in result["rows"] if r["fqn"] == "Global")
    assert global_row["measure"] is None or not global_row["measure"].startswith("cpu_")
    # The notebook's diff: the same rows, CPU medians as columns
    rows = fqntrace.load(traced).diff(slow, threshold=10, frame=False)
    spins = next(r for r in rows if r["fqn"] == "Outer.spins")
    assert spins["regressed"] and spins["measure"].startswith("cpu_")
    assert [spins["cpu_ms_base"], spins["cpu_ms_new"]] == row["cpu_ms"]
    # --measure wall: the same test on the ops' wall time. Spinning in Python is no op's time:
    # the 1.8 ms more spin per step is not in what is tested. (Whether the gate passes is not
    # asserted: Outer.spins' own op is a ~20 us `mul`, and a run beside another CI job once
    # slowed it by more than the threshold, the whole interval over it.)
    code, result = gate(traced, slow, "--measure", "wall")
    assert not result["measure"].startswith("cpu_")
    row = next(r for r in result["rows"] if r["fqn"] == "Outer.spins")
    assert row["measure"] in ("ms", "speed_corrected") and "cpu_ms" not in row
    assert max(row["self_ms"]) < 0.25 * SPIN_MS, row
    assert abs(row["change_ms"]) < 0.25 * (SPIN_MS * 1.6 - SPIN_MS), row


def test_cpu_readings_are_opt_in_and_diff_falls_back_to_wall_time(tmp_path, traced, run):
    path = tmp_path / "off.json"
    program = (
        f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import torch; torch.set_num_threads(1)\n"
        f"import test_cpu_time as t; t.train({str(path)!r}, steps=6, cpu=None)\n"
    )
    proc = run(program, env_extra={"FQNTRACE_CPU": ""}, check_rc=0)  # unset: the default
    assert "fqntrace" not in proc.stderr
    assert not any("self_cpu_ns" in e["args"] for e in slices(load_trace(path)))
    s = summarize.load_for_summary(str(path))
    assert "step_self_cpu_ms" not in s["modules"]["Outer.spins"]
    assert "cpu_ms" not in s["modules"]["Outer.spins"]["forward"]
    code, result = gate(traced, str(path))
    assert not result["measure"].startswith("cpu_")
    on = run(program.replace("off.json", "on.json"), env_extra={"FQNTRACE_CPU": "1"}, check_rc=0)
    assert "fqntrace" not in on.stderr
    assert any("self_cpu_ns" in e["args"] for e in slices(load_trace(tmp_path / "on.json")))
    bad = run(
        program.replace("off.json", "bad.json"), env_extra={"FQNTRACE_CPU": "sometimes"}, check_rc=0
    )
    lines = [line for line in bad.stderr.splitlines() if "FQNTRACE_CPU" in line]
    assert len(lines) == 1 and "it stays off" in lines[0], bad.stderr
    assert not any("self_cpu_ns" in e["args"] for e in slices(load_trace(tmp_path / "bad.json")))


class Checkpointed(nn.Module):
    """Outer re-run in backward (activation checkpointing): a recompute inside a node."""

    def __init__(self, spin_ms):
        super().__init__()
        self.inner = Outer(spin_ms)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)


def test_recompute_has_its_own_cpu_time_taken_out_of_the_node_around_it(tmp_path):
    spin_ms = 4 * SPIN_MS  # far more than the node's own work, whatever the machine's speed
    torch.manual_seed(0)
    model, x = Checkpointed(spin_ms), torch.randn(32, 64)
    path = str(tmp_path / "ckpt.json")
    with fqntrace.profile(path, cpu=True):
        for _ in range(3):
            model(x).sum().backward()
            fqntrace.step()
    events = slices(load_trace(path))
    recomputes = [
        e for e in events if e["cat"] == "user_annotation" and e["args"]["phase"] == "recompute"
    ]
    spins = [e for e in recomputes if e["args"]["fqn"] == "Checkpointed.inner.spins"]
    assert len(spins) == 3
    for inner in (e for e in recomputes if e["args"]["fqn"] == "Checkpointed.inner"):
        around = [
            e
            for e in events
            if e["cat"] == "cpu_op"
            and e["args"]["depth"] == 0
            and e["tid"] == inner["tid"]
            and e["ts"] <= inner["ts"]
            and e["ts"] + e["dur"] >= inner["ts"] + inner["dur"]
        ]
        assert len(around) == 1 and around[0]["args"]["phase"] == "backward", around
        # The node's own CPU time is at most its wall time outside the recompute: the
        # recompute's spin is taken out of it.
        outside_us = around[0]["dur"] - inner["dur"]
        assert around[0]["args"]["self_cpu_ns"] / 1000 <= outside_us + 500, (around[0], inner)
    for r in spins:
        assert r["args"]["self_cpu_ns"] >= spin_ms * 1e6 * 0.95, r
    s = summarize.load_for_summary(path)
    assert (
        s["modules"]["Checkpointed.inner.spins"]["recompute"]["self_cpu_ms"] >= 3 * spin_ms * 0.95
    )
