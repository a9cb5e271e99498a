"""Models that change while they run (issue 22): nothing of fqntrace's sits on a parameter, the
AccumulateGrad owner survives swap_tensors, names follow surgery and wrapping, torch.profiler
sees no module ranges unless asked (docs/compatibility.md)."""

import gc
import json
import traceback
import weakref

import fqntrace
import pytest
import torch
from torch import nn


def events(path):
    return [json.loads(line) for line in open(path)]


def accumulate_fqns(path):
    return sorted(
        e["args"]["fqn"] for e in events(path) if e.get("name") == "torch::autograd::AccumulateGrad"
    )


def module_fqns(path):
    return {e["args"]["fqn"] for e in events(path) if e.get("name", "").startswith("nn.Module: ")}


def test_parameters_carry_nothing_of_ours_and_swap_keeps_their_owner(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with fqntrace.profile(str(tmp_path / "a.jsonl")) as before:
        model(x).sum().backward()
    for p in model.parameters():
        assert weakref.getweakrefs(p) == [] and not p._backward_hooks
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        model.double()  # swap_tensors refuses tensors with weak references
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    model.zero_grad()
    with fqntrace.profile(str(tmp_path / "b.jsonl")) as after:
        model(x.double()).sum().backward()
    expected = ["Sequential.0", "Sequential.0", "Sequential.2", "Sequential.2"]
    assert accumulate_fqns(before) == expected
    assert accumulate_fqns(after) == expected


def test_tied_weights_keep_their_first_owner(tmp_path):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 4)
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.embed.weight  # registered on head after embed

        def forward(self, idx):
            return self.head(self.embed(idx))

    model = Tied()
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        model(torch.tensor([1, 2])).sum().backward()
    assert accumulate_fqns(path) == ["Tied.embed"]


def test_a_tensor_at_a_dead_parameters_address_inherits_no_owner(tmp_path):
    """Owners are never removed (nothing of ours on a parameter tells us it died), so the next
    object at a dead parameter's address must not answer to its module: a leaf input whose
    gradient is taken (a gradient penalty, a saliency map) belongs to no module."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    with fqntrace.profile(str(tmp_path / "a.jsonl")) as path:
        model(torch.randn(2, 4)).sum().backward()
    assert accumulate_fqns(path) == ["Sequential.0", "Sequential.0", "Sequential.1", "Sequential.1"]
    dead = {id(p) for p in model.parameters()}
    del model
    gc.collect()
    # CPython hands a freed object's memory to the next object of its size.
    kept = []
    for _ in range(5000):
        x = torch.randn(3, requires_grad=True)
        if id(x) in dead:
            break
        kept.append(x)
    else:
        pytest.skip("no new tensor took a dead parameter's address")
    with fqntrace.profile(str(tmp_path / "b.jsonl")) as path:
        (x * 2).sum().backward()
    assert accumulate_fqns(path) == ["Global"]


def test_names_follow_surgery_and_wrapping_and_old_events_keep_theirs(tmp_path):
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)

    class Wrapper(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

    inner = Inner()
    x = torch.randn(1, 2)
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        inner(x)  # a root: Inner, Inner.fc
        inner.extra = nn.Sequential(nn.Linear(2, 2))  # registered under a named parent
        inner.extra(x)
        inner.fc = nn.Linear(2, 2)  # replaced
        wrapped = Wrapper(inner)  # wrapped after its first call
        wrapped(x).sum().backward()
    linear_fqns = [e["args"]["fqn"] for e in events(path) if e.get("name") == "aten::linear"]
    assert linear_fqns == ["Inner.fc", "Inner.extra.0", "Wrapper.inner.fc"]
    assert {"Wrapper", "Wrapper.inner", "Wrapper.inner.fc"} <= module_fqns(path)
    assert accumulate_fqns(path)[-2:] == ["Wrapper.inner.fc", "Wrapper.inner.fc"]


def test_lazy_modules_are_traced_without_a_word(tmp_path, capfd):
    model = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(2))
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        model(torch.randn(2, 5)).sum().backward()
    assert "fqntrace" not in capfd.readouterr().err
    assert accumulate_fqns(path) == ["Sequential.0", "Sequential.0", "Sequential.2", "Sequential.2"]


def test_a_traceback_has_no_frame_of_ours(tmp_path):
    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    outer = nn.Sequential(nn.Sequential(Boom()))
    with fqntrace.profile(str(tmp_path / "t.jsonl")):
        try:
            outer(torch.ones(1))
        except RuntimeError as error:
            frames = traceback.extract_tb(error.__traceback__)
    assert not [f for f in frames if "fqntrace" in f.filename]
    assert [f.name for f in frames].count("_wrapped_call_impl") == 3  # torch's own, one per level


def test_torch_profiler_sees_module_ranges_only_when_asked(tmp_path, run):
    code = """
import pytest
import torch
from torch import nn
model = nn.Sequential(nn.Linear(2, 2))
with torch.profiler.profile() as prof:
    model(torch.randn(1, 2))
print(sorted(e.key for e in prof.key_averages() if e.key.startswith(("nn.Module", "fqntrace"))))
"""
    plain = run(code, {"FQNTRACE": str(tmp_path / "a.json")}, check_rc=0)
    asked = run(
        code, {"FQNTRACE": str(tmp_path / "b.json"), "FQNTRACE_MODULE_RANGES": "1"}, check_rc=0
    )
    assert plain.stdout.strip() == "[]"
    assert asked.stdout.strip() == "['nn.Module: Sequential', 'nn.Module: Sequential.0']"
    for name in ("a.json", "b.json"):  # fqntrace's own trace has the module spans either way
        with open(tmp_path / name) as f:
            spans = {e["name"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
        assert {"nn.Module: Sequential", "nn.Module: Sequential.0"} <= spans
