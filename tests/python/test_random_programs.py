"""Randomized validity: programs drawn from seeds (tests/python/random_program.py: random module
trees × hooks, checkpointing, no_grad, a compiled region, export, script, threads, exceptions in
forward) are traced; every trace must pass `validate`, and every fqn on an op or a module span
must be one a fresh ModTracker can give a module of the tree (or Global). A failure names its
seed and the command that replays it.

The seeds are fixed so the run is reproducible; RANDOM_PROGRAM_SEEDS=1,2,3 (or a range, 100-160)
draws others."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "random_program.py")
DEFAULT_SEEDS = "0-5"


def _seeds():
    text = os.environ.get("RANDOM_PROGRAM_SEEDS", DEFAULT_SEEDS)
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


@pytest.mark.parametrize("seed", _seeds())
def test_random_program_traces_validate_with_modtracker_names(tmp_path, seed):
    trace, names = tmp_path / f"seed{seed}.json", tmp_path / f"seed{seed}.names.json"
    replay = f"FQNTRACE={trace} {sys.executable} {PROGRAM} {seed} {names}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(FQNTRACE=str(trace), OMP_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, PROGRAM, str(seed), str(names)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "fqntrace" not in run.stderr, (
        f"seed {seed} (replay: {replay}):\n{run.stderr[-3000:]}"
    )
    check = subprocess.run(
        [sys.executable, "-m", "fqntrace", "validate", str(trace)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, f"seed {seed} (replay: {replay}): {check.stderr}"
    with open(names) as f:
        known = json.load(f)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    possible = set(known["possible"]) | {"Global"}
    named = {
        e["args"]["fqn"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "module_span")
    }
    assert named <= possible, (
        f"seed {seed} {known['features']} (replay: {replay}): fqns no "
        f"fresh ModTracker gives: {sorted(named - possible)}"
    )
    spans = {e["args"]["fqn"] for e in events if e.get("name", "").startswith("nn.Module: ")}
    # Modules compiled into a graph run without a span of their own (docs/compile.md).
    if "compile" not in known["features"]:
        assert set(known["ran"]) <= spans, (
            f"seed {seed} (replay: {replay}): modules that ran "
            f"without a span: {sorted(set(known['ran']) - spans)}"
        )
