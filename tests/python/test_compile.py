"""torch.compile: tracing never changes what Dynamo compiles (graphs, graph breaks, recompiles,
losses), never fails, and compiled code keeps its module names — the region, CompiledFunction
and CompiledFunctionBackward carry the compiled module, and the kernels inside carry the
submodule they were generated from. Each case trains 3 steps of
compile_scripts/train_compiled.py, untraced and traced: every case in turn in one interpreter
for each side (Dynamo reset between cases), so the suite starts two interpreters, not 26."""

import json
import os
import subprocess
import sys

import pytest
from conftest import load_trace, slices

SCRIPT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "compile_scripts", "train_compiled.py"
)

CASES = {
    "whole": ["--form", "whole"],
    "child": ["--form", "child"],
    "method": ["--form", "method"],
    "function": ["--form", "function"],
    "whole_fullgraph": ["--form", "whole", "--fullgraph"],
    "whole_aot_eager": ["--form", "whole", "--backend", "aot_eager"],
    "method_aot_eager_fullgraph": ["--form", "method", "--backend", "aot_eager", "--fullgraph"],
    "whole_dynamic": ["--form", "whole", "--dynamic"],
    "method_dynamic": ["--form", "method", "--dynamic"],
    "method_graph_break": ["--form", "method", "--graph-break"],
    "whole_graph_break": ["--form", "whole", "--graph-break"],
    "whole_checkpoint": ["--form", "whole", "--checkpoint"],
    "gpt2": ["--form", "whole", "--model", "gpt2"],
}


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    # One cache for the module: traced and untraced compiles are cached apart by design, so a
    # shared cache also checks that a warm untraced cache does not hide module names.
    return str(tmp_path_factory.mktemp("inductor-cache"))


def start(args, cache, trace=None):
    """The training script in a fresh interpreter, started (traced when `trace` is a path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env["TORCHINDUCTOR_CACHE_DIR"] = cache
    if trace is not None:
        env["FQNTRACE"] = str(trace)
    return subprocess.Popen(
        [sys.executable, SCRIPT, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(proc):
    """(what the script printed as JSON, its stderr) once it has ended well."""
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert "fqntrace:" not in stderr, stderr
    return json.loads(stdout.strip().splitlines()[-1]), stderr


def train(args, cache, trace=None):
    return result(start(args, cache, trace))


def last_step(trace, case=None):
    """Slices of the last step (its compiles are done) of a case: (name, fqn, phase) of each."""
    events = slices(trace)
    prefix = "step" if case is None else f"{case} step"
    step = max((e for e in events if e["name"].startswith(prefix)), key=lambda e: e["ts"])
    end = step["ts"] + step["dur"]
    return [
        (e["name"], e["args"].get("fqn"), e["args"].get("phase"))
        for e in events
        if step["ts"] <= e["ts"] <= end
    ]


def named(events, names, fqn, phase):
    return [e for e in events if e[0] in names and e[1] == fqn and e[2] == phase]


MATMULS = ("aten::addmm", "aten::mm")


def check_kernels_named(events, root="Net"):
    for sub in ("blocks.0.fc1", "blocks.2.fc2", "head"):
        for phase in ("forward", "backward"):
            assert named(events, MATMULS, f"{root}.{sub}", phase), (sub, phase, events)


def check_whole(events):
    assert named(events, ("CompiledFunction",), "Net", "forward")
    assert named(events, ("CompiledFunctionBackward",), "Net", "backward")
    assert any(e[0].startswith("Torch-Compiled Region") and e[1] == "Net" for e in events)
    check_kernels_named(events)


def check_block_1(events):
    # module.compile() and torch.compile(child): the block's own name, not its parent's.
    assert any(e[0].startswith("Torch-Compiled Region") and e[1] == "Net.blocks.1" for e in events)
    assert named(events, ("CompiledFunction",), "Net.blocks.1", "forward")
    assert named(events, ("CompiledFunctionBackward",), "Net.blocks.1", "backward")
    for sub in ("fc1", "fc2"):
        for phase in ("forward", "backward"):
            assert named(events, MATMULS, f"Net.blocks.1.{sub}", phase), (sub, phase)


def check_gpt2(events):
    root = "GPT2LMHeadModel.transformer.h"
    for layer in ("0", "1"):
        for sub in ("attn.c_attn", "mlp.c_proj"):
            for phase in ("forward", "backward"):
                assert named(events, MATMULS, f"{root}.{layer}.{sub}", phase), (layer, sub, phase)


CHECKS = {
    "whole": check_whole,
    "whole_fullgraph": check_whole,
    "whole_dynamic": check_kernels_named,
    "child": check_block_1,
    "method": check_block_1,
    "method_dynamic": check_block_1,
    "method_graph_break": check_block_1,
    "whole_graph_break": check_kernels_named,
    "whole_checkpoint": check_kernels_named,
    # A compiled function given the model: the model is a root, named by its class.
    "function": check_kernels_named,
    # aot_eager runs the graph without inductor: the regions are named, the ops take the region's.
    "whole_aot_eager": lambda events: named(events, ("CompiledFunction",), "Net", "forward"),
    "method_aot_eager_fullgraph": lambda events: named(
        events, ("CompiledFunctionBackward",), "Net.blocks.1", "backward"
    ),
    "gpt2": check_gpt2,
}


@pytest.fixture(scope="module")
def compiled_runs(tmp_path_factory, inductor_cache):
    """Every case, untraced and traced side by side (a core each): {"untraced": {case: line},
    "traced": {case: line}, "stderr": traced stderr, "path": the trace}."""
    path = tmp_path_factory.mktemp("compiled") / "t.json"
    args = ["--cases", json.dumps(CASES)]
    runs = [start(args, inductor_cache), start(args, inductor_cache, path)]
    try:
        sides = [all_results(run) for run in runs]
    finally:
        for run in runs:
            run.kill()  # after a failed assert, the other run does not outlive the test
    (untraced, _), (traced, stderr) = sides
    return {"untraced": untraced, "traced": traced, "stderr": stderr, "path": path}


def all_results(proc):
    """({case: what the script printed for it}, stderr) once it has ended well."""
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    assert "fqntrace:" not in stderr, stderr
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {line.pop("case"): line for line in lines}, stderr


@pytest.fixture(scope="module")
def compiled_trace(compiled_runs):
    path = compiled_runs["path"]
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", "validate", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return load_trace(path)


def test_every_case_ran_on_both_sides(compiled_runs):
    assert sorted(compiled_runs["untraced"]) == sorted(CASES)
    assert sorted(compiled_runs["traced"]) == sorted(CASES)
    assert "global hooks" not in compiled_runs["stderr"]  # torch's warning is not ours to cause


def test_compiled_code_never_shows_dynamos_wrapper_name(compiled_trace):
    assert not any("_orig_mod" in e["args"].get("fqn", "") for e in slices(compiled_trace))


@pytest.mark.parametrize("case", list(CASES))
def test_tracing_does_not_change_the_compiled_program(case, compiled_runs, compiled_trace):
    # graphs, graph breaks, recompiles, frames and every loss
    assert compiled_runs["traced"][case] == compiled_runs["untraced"][case]
    checked = CHECKS[case](last_step(compiled_trace, case))
    assert checked is None or checked


# The summary splits a compiled model's time by submodule, forward and backward.
def test_summary_of_compiled_model_shows_submodules(tmp_path, inductor_cache):
    path = tmp_path / "t.json"
    train(CASES["whole"], inductor_cache, path)
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", "--json", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)["modules"]
    for fqn in ("Net.blocks.0.fc1", "Net.blocks.2.fc2", "Net.head"):
        phases = modules[fqn]
        assert phases["forward"]["self_ms"] > 0, (fqn, phases)
        assert phases["backward"]["self_ms"] > 0, (fqn, phases)
