"""fqntrace's nn.Module.__call__ (python/fqntrace/_hooks.py, binding/module_scope_methods.cpp):
module scopes without global forward hooks, so torch's _call_impl keeps its fast path."""

import json
import warnings

import fqntrace
import pytest
import torch
from fqntrace import _hooks
from torch.nn.modules import module as torch_module


def module_ranges(path):
    events = [json.loads(line) for line in open(path)]
    return [e for e in events if e.get("ph") == "X" and "module_type" in e.get("args", {})]


class Fails(torch.nn.Module):
    def forward(self, x):
        x = x * 2
        raise ValueError("from forward")


class Catches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Fails()
        self.after = torch.nn.Linear(2, 2)

    def forward(self, x):
        try:
            self.inner(x)
        except ValueError:
            pass
        return self.after(x)


def test_scopes_need_no_global_hooks(tmp_path):
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        assert _hooks.installed()
        for hooks in (
            torch_module._global_forward_pre_hooks,
            torch_module._global_forward_hooks,
            torch_module._global_backward_hooks,
            torch_module._global_backward_pre_hooks,
        ):
            assert len(hooks) == 0
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())(torch.randn(1, 2))
    assert sorted(e["args"]["fqn"] for e in module_ranges(path)) == [
        "Sequential",
        "Sequential.0",
        "Sequential.1",
    ]


def test_a_forward_that_raises_closes_its_scope_and_the_exception_passes_unchanged(tmp_path):
    model = Catches()
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        model(torch.randn(1, 2))
        with pytest.raises(ValueError, match="from forward") as caught:
            Fails()(torch.randn(1, 2))
        assert caught.value.__traceback__ is not None
    ranges = {e["args"]["fqn"]: e for e in module_ranges(path)}
    outer, inner, after = ranges["Catches"], ranges["Catches.inner"], ranges["Catches.after"]
    # The failed module's range ends before its sibling starts: the scope was closed on raise.
    assert inner["ts"] + inner["dur"] <= after["ts"]
    assert outer["ts"] <= inner["ts"] and after["ts"] + after["dur"] <= outer["ts"] + outer["dur"]
    ops = [json.loads(line) for line in open(path)]
    linear = [e for e in ops if e.get("name") == "aten::linear"]
    assert [e["args"]["fqn"] for e in linear] == ["Catches.after"]


def test_module_call_passes_arguments_and_results_through():
    class Echo(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return args, kwargs

    fqntrace_installed = _hooks.installed()
    _hooks.install()
    try:
        assert Echo()(1, 2, key=3) == ((1, 2), {"key": 3})
        assert Echo().__call__(4) == ((4,), {})
        assert torch.nn.Module.__call__(Echo(), 5) == ((5,), {})
    finally:
        if not fqntrace_installed:
            _hooks.uninstall()


def test_uninstall_gives_torch_its_call_back():
    was = _hooks.installed()
    _hooks.install()
    assert torch.nn.Module.__dict__["__call__"] is not torch.nn.Module._wrapped_call_impl
    _hooks.uninstall()
    assert torch.nn.Module.__dict__["__call__"] is torch.nn.Module._wrapped_call_impl
    if was:
        _hooks.install()


def test_compiling_a_module_does_not_warn_about_global_hooks(tmp_path):
    model = torch.nn.Linear(2, 2)
    with fqntrace.profile(str(tmp_path / "t.jsonl")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.compile(model, backend="eager")


def test_fx_symbolic_trace_gives_our_call_back(tmp_path):
    """torch.fx patches nn.Module.__call__ while it traces and restores what it found."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    with fqntrace.profile(str(tmp_path / "t.jsonl")) as path:
        ours = torch.nn.Module.__dict__["__call__"]
        graph_module = torch.fx.symbolic_trace(model)
        assert torch.nn.Module.__dict__["__call__"] is ours
        graph_module(torch.randn(1, 2))
        model(torch.randn(1, 2))
    # Both run with scopes: the GraphModule (a root named after the class it traced) and the model.
    fqns = [e["args"]["fqn"] for e in module_ranges(path)]
    assert fqns.count("Sequential") == 2 and fqns.count("Sequential.0") == 2
