"""fqntrace.ModTracker / fqntrace.ModuleTracker against torch's own trackers on the same models:
hierarchy, backward order, user hooks, activation checkpointing, awkward control flow, get_module,
and agreement of the names with the fqns of a trace."""

import gc
import json
import warnings
from collections import namedtuple
from copy import copy

import fqntrace
import pytest
import torch
from torch import nn
from torch.distributed._tools.mod_tracker import ModTracker as TorchModTracker
from torch.utils.checkpoint import checkpoint
from torch.utils.module_tracker import ModuleTracker as TorchModuleTracker

OURS = [fqntrace.ModTracker, fqntrace.ModuleTracker]
TORCH_OF = {fqntrace.ModTracker: TorchModTracker, fqntrace.ModuleTracker: TorchModuleTracker}
# Each of ours next to torch's, for tests that run the same scenario on both.
PAIRS = pytest.mark.parametrize("ours", OURS, ids=["ModTracker", "ModuleTracker"])


def record_user_hooks(tracker, log):
    """Registers the four user hooks on a ModTracker; each appends
    (kind, fqn or None, fqn in parents, is_bw) to `log`."""

    def make(kind):
        def hook(mod, *args):
            fqn = tracker.get_known_fqn(mod) if mod is not None else None
            log.append((kind, fqn, fqn in tracker.parents, tracker.is_bw))

        return hook

    tracker.register_user_hooks(make("pre_fw"), make("post_fw"), make("pre_bw"), make("post_bw"))


# --- hierarchy (the seed's model: ModuleDict, ModuleList, dict inputs and outputs) ---------------


class Probe(nn.Module):
    """Records the tracker's view inside its forward and when its gradient flows back."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def forward(self, x):
        state = self.state
        x = x["a"].relu_()
        state["fw"].append((copy(state["tracker"].parents), state["tracker"].is_bw))
        x.register_hook(
            lambda grad: state["bw"].append(
                (copy(state["tracker"].parents), state["tracker"].is_bw)
            )
        )
        return {"a": torch.mm(x, x)}


class Mod(nn.Module):
    def __init__(self, state):
        super().__init__()
        self.a = Probe(state)
        self.b = nn.ModuleDict({"nest": Probe(state)})
        self.c = nn.ModuleList([Probe(state)])

    def forward(self, x):
        x = self.c[0](x)
        return self.b["nest"](self.a(x))


def run_hierarchy(tracker_cls):
    state = {"fw": [], "bw": []}
    mod = Mod(state)
    with tracker_cls() as tracker:
        state["tracker"] = tracker
        for _ in range(2):
            mod({"a": torch.randn(10, 10, requires_grad=True).clone()})["a"].sum().backward()
        after = (copy(tracker.parents), tracker.is_bw)
    return state["fw"], state["bw"], after


@PAIRS
def test_module_hierarchy_forward_and_reverse_backward_twice(ours):
    seen_fw, seen_bw, after = run_hierarchy(ours)
    g = {"Global", "Mod"}
    assert (
        seen_fw
        == [(g | {"Mod.c.0"}, False), (g | {"Mod.a"}, False), (g | {"Mod.b.nest"}, False)] * 2
    )
    assert (
        seen_bw == [(g | {"Mod.b.nest"}, True), (g | {"Mod.a"}, True), (g | {"Mod.c.0"}, True)] * 2
    )
    assert after == ({"Global"}, False)
    assert (seen_fw, seen_bw, after) == run_hierarchy(TORCH_OF[ours])


@PAIRS
def test_bw_detection(ours):
    mod = nn.Linear(2, 2)
    seen = []
    with ours() as tracker:
        out = mod(torch.rand(2, requires_grad=True))
        out.register_hook(lambda grad: seen.append((copy(tracker.parents), tracker.is_bw)))
        assert not tracker.is_bw
        out.sum().backward()
        assert not tracker.is_bw
        assert tracker.parents == {"Global"}
    assert seen == [({"Global", "Linear"}, True)]


# --- user hooks ------------------------------------------------------------------------------


class Bar(nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = nn.Linear(10, 10)

    def forward(self, x):
        return self.foo(x).relu_()


def run_user_hooks(tracker_cls, delete_before_backward):
    tracker, log = tracker_cls(), []
    record_user_hooks(tracker, log)
    mod = Bar()
    with tracker:
        loss = mod(torch.rand(10, 10, requires_grad=True)).sum()
        if delete_before_backward:
            del mod
            gc.collect()
        loss.backward()
    return tracker, log


def test_user_hooks_order_and_double_registration():
    tracker, log = run_user_hooks(fqntrace.ModTracker, False)
    assert log == [
        ("pre_fw", "Bar", True, False),
        ("pre_fw", "Bar.foo", True, False),
        ("post_fw", "Bar.foo", True, False),
        ("post_fw", "Bar", True, False),
        ("pre_bw", "Bar", True, True),
        ("pre_bw", "Bar.foo", True, True),
        ("post_bw", "Bar", True, True),
        ("post_bw", "Bar.foo", True, True),
    ]
    assert log == run_user_hooks(TorchModTracker, False)[1]
    assert tracker.parents == {"Global"}

    for position in range(4):
        hooks = [None] * 4
        hooks[position] = lambda *args: None
        with pytest.raises(AssertionError):
            tracker.register_user_hooks(*hooks)
    tracker.clear_user_hooks()
    calls = []
    tracker.register_user_hooks(pre_fw_hook=lambda mod, inp: calls.append(mod))
    lin = nn.Linear(2, 2)
    with tracker:
        lin(torch.rand(1, 2))
    assert calls == [lin]
    with pytest.raises(AssertionError):
        tracker.register_user_hooks(pre_fw_hook=lambda mod, inp: None)
    tracker.register_user_hooks(post_fw_hook=lambda mod, inp, out: None)  # another kind: fine


def test_user_hooks_get_none_for_module_deleted_before_backward():
    _, log = run_user_hooks(fqntrace.ModTracker, True)
    assert log == [
        ("pre_fw", "Bar", True, False),
        ("pre_fw", "Bar.foo", True, False),
        ("post_fw", "Bar.foo", True, False),
        ("post_fw", "Bar", True, False),
        ("pre_bw", None, False, True),
        ("pre_bw", None, False, True),
        ("post_bw", None, False, True),
        ("post_bw", None, False, True),
    ]
    assert log == run_user_hooks(TorchModTracker, True)[1]


Pair = namedtuple("Pair", "left right")


class Fork(nn.Module):
    """Several inputs and outputs requiring grad: the multi-grad paths, not the 1-tensor one."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.lin = nn.Linear(3, 3)

    def forward(self, a, b, scale=2.0, extra=None):
        left, right = self.lin(a) * scale, self.lin(b).tanh()
        if self.kind == "tuple":
            return left, right
        if self.kind == "namedtuple":
            return Pair(left, right)
        return {"left": left, "skip": None, "right": [right, 3]}


def structure(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return [structure(v) for v in value]
    return value


@pytest.mark.parametrize("kind", ["tuple", "namedtuple", "dict"])
def test_multi_tensor_inputs_and_outputs_match_torch(kind):
    def run(tracker_cls):
        tracker, log = tracker_cls(), []

        def make(name):
            def hook(mod, grads):
                log.append(
                    (name, tracker.get_known_fqn(mod), sorted(tracker.parents), structure(grads))
                )

            return hook

        tracker.register_user_hooks(pre_bw_hook=make("pre_bw"), post_bw_hook=make("post_bw"))
        mod = Fork(kind)
        a = torch.randn(2, 3, requires_grad=True)
        b = torch.randn(2, 3, requires_grad=True) * 1
        with tracker:
            out = mod(a, b, extra={"mask": torch.ones(2)})
            leaves = list(out.values()) if isinstance(out, dict) else list(out)
            total = leaves[0].sum() + (leaves[2][0] if kind == "dict" else leaves[1]).sum()
            total.backward()
            log.append(("after", sorted(tracker.parents), tracker.is_bw))
        return log

    ours = run(fqntrace.ModTracker)
    assert ours == run(TorchModTracker)
    # Fork.lin runs twice (counted twice in parents); Fork's inputs end together ("all").
    assert [entry[:3] for entry in ours] == [
        ("pre_bw", "Fork", ["Fork", "Global"]),
        ("pre_bw", "Fork.lin", ["Fork", "Fork.lin", "Global"]),
        ("pre_bw", "Fork.lin", ["Fork", "Fork.lin", "Global"]),
        ("post_bw", "Fork.lin", ["Fork", "Fork.lin", "Global"]),
        ("post_bw", "Fork", ["Fork", "Fork.lin", "Global"]),
        ("post_bw", "Fork.lin", ["Fork.lin", "Global"]),
        ("after", ["Global"], False),
    ]
    assert ours[4][3] == [[(2, 3), (2, 3)]]  # post_bw gets (grads of all inputs,)


# --- activation checkpointing ----------------------------------------------------------------


class Stack(nn.Module):
    def __init__(self, n_layers, dim, use_reentrant):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.use_reentrant = use_reentrant

    def forward(self, x):
        for i, block in enumerate(self.linears):
            if i >= 1:
                x = checkpoint(block, x, preserve_rng_state=True, use_reentrant=self.use_reentrant)
            else:
                x = block(x)
            x = torch.nn.functional.relu(x)
        return x


def run_ac(tracker_cls, use_reentrant):
    tracker, log = tracker_cls(), []
    record_user_hooks(tracker, log)
    model = Stack(2, 8, use_reentrant)
    with tracker:
        model(torch.randn(2, 8)).sum().backward()
        assert tracker.parents == {"Global"}
    return log


FORWARD_AC = [
    ("pre_fw", "Stack", True, False),
    ("pre_fw", "Stack.linears.0", True, False),
    ("post_fw", "Stack.linears.0", True, False),
    ("pre_fw", "Stack.linears.1", True, False),
    ("post_fw", "Stack.linears.1", True, False),
    ("post_fw", "Stack", True, False),
    ("pre_bw", "Stack", True, True),
]


def test_activation_checkpointing_non_reentrant():
    log = run_ac(fqntrace.ModTracker, use_reentrant=False)
    assert log == FORWARD_AC + [
        ("pre_bw", "Stack.linears.1", True, True),
        ("pre_fw", "Stack.linears.1", True, True),  # recompute inside the backward
        ("post_fw", "Stack.linears.1", True, True),
        ("post_bw", "Stack.linears.1", True, True),
        ("pre_bw", "Stack.linears.0", True, True),
        ("post_bw", "Stack.linears.0", True, True),
        ("post_bw", "Stack", True, True),
    ]
    assert log == run_ac(TorchModTracker, use_reentrant=False)


def test_activation_checkpointing_reentrant_matches_torch():
    # Reentrant: the checkpointed forward ran under no_grad, so its outputs got no pre-bw hook;
    # the recompute happens inside the backward and the post-bw hook fires after it has popped
    # the module. This is what torch's ModTracker does; fqntrace's does the same.
    log = run_ac(fqntrace.ModTracker, use_reentrant=True)
    assert log == FORWARD_AC + [
        ("pre_fw", "Stack.linears.1", True, True),
        ("post_fw", "Stack.linears.1", True, True),
        ("post_bw", "Stack.linears.1", False, True),
        ("pre_bw", "Stack.linears.0", True, True),
        ("post_bw", "Stack.linears.0", True, True),
        ("post_bw", "Stack", True, True),
    ]
    assert log == run_ac(TorchModTracker, use_reentrant=True)


@PAIRS
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_of_lambda_around_module_never_fails(ours, use_reentrant):
    def run(tracker_cls):
        mod = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
        inp = torch.rand(1, 2, requires_grad=True)
        seen = []
        with tracker_cls() as tracker:
            mod[2].register_forward_pre_hook(
                lambda m, i: seen.append((sorted(tracker.parents), tracker.is_bw))
            )
            res = checkpoint(lambda x: mod(x), inp, use_reentrant=use_reentrant)
            res.sum().backward()
            seen.append((sorted(tracker.parents), tracker.is_bw))
        return seen

    seen = run(ours)
    assert seen[0] == (["Global", "Sequential", "Sequential.2"], False)
    assert seen[1] == (["Global", "Sequential", "Sequential.2"], True)  # recompute
    assert seen[-1] == (["Global"], False)
    assert seen == run(TORCH_OF[ours])


# --- awkward control flow --------------------------------------------------------------------


class SelfCaller(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.ran = False

    def forward(self, inp):
        if not self.ran:
            self.ran = True
            return self(inp)
        self.ran = False
        return self.inner(inp)


@PAIRS
def test_module_calling_itself(ours):
    def run(tracker_cls):
        mod = SelfCaller()
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tracker_cls() as tracker:
                mod.inner.register_forward_pre_hook(
                    lambda m, i: seen.append((sorted(tracker.parents), tracker.is_bw))
                )
                out = mod(torch.rand(1, 2, requires_grad=True))
                out.register_hook(lambda g: seen.append((sorted(tracker.parents), True)))
                seen.append((sorted(tracker.parents), tracker.is_bw))
                out.sum().backward()
                seen.append((sorted(tracker.parents), tracker.is_bw))
        return seen, sorted({type(w.message).__name__ for w in caught})

    seen, warned = run(ours)
    assert seen[0] == (["Global", "SelfCaller", "SelfCaller.inner"], False)
    assert seen[-1] == (["Global"], False)
    expected = run(TORCH_OF[ours])
    assert seen == expected[0]
    if ours is fqntrace.ModTracker:  # both ModTrackers warn that the module was entered twice
        assert warned == expected[1] == ["UserWarning"]
        assert seen[1] == (["Global"], False)  # counted: both calls closed after the forward
        assert seen[2] == (["Global", "SelfCaller", "SelfCaller.inner"], True)


class Failing(nn.Module):
    def forward(self, x):
        raise ValueError("boom")


class Catcher(nn.Module):
    def __init__(self):
        super().__init__()
        self.bad = Failing()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        try:
            self.bad(x)
        except ValueError:
            pass
        return self.lin(x)


@PAIRS
def test_exception_in_submodule_caught_by_parent(ours):
    def run(tracker_cls):
        net, seen = Catcher(), []
        with tracker_cls() as tracker:
            net.lin.register_forward_pre_hook(lambda m, i: seen.append(sorted(tracker.parents)))
            for _ in range(2):
                net(torch.randn(1, 2, requires_grad=True)).sum().backward()
                seen.append(sorted(tracker.parents))
        return seen

    expected = [["Catcher", "Catcher.lin", "Global"], ["Global"]] * 2
    assert run(ours) == expected
    if ours is fqntrace.ModTracker:
        assert run(TorchModTracker) == expected
    else:
        # torch's ModuleTracker has no always-call forward hook: the failed module stays listed.
        assert run(TorchModuleTracker)[0] == ["Catcher", "Catcher.bad", "Catcher.lin", "Global"]


class GradInForward(nn.Module):
    """Calls torch.autograd.grad inside its forward (gradient penalties, force fields)."""

    def __init__(self, state):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.out = nn.Linear(2, 2)
        self.state = state

    def forward(self, x):
        h = self.lin(x)
        (g,) = torch.autograd.grad(h.sum(), x, create_graph=True)
        self.state.append(sorted(self.state.tracker.parents))
        return self.out(g * h)


class _Log(list):
    tracker = None


@PAIRS
def test_backward_inside_forward_keeps_running_modules(ours):
    state = _Log()
    mod = GradInForward(state)
    with ours() as tracker:
        state.tracker = tracker
        out = mod(torch.randn(1, 2, requires_grad=True) * 1)
        assert sorted(tracker.parents) == ["Global"]
        out.sum().backward()
    assert state == [["Global", "GradInForward"]]
    assert tracker.parents == {"Global"}
    if ours is fqntrace.ModTracker:
        # torch's ModTracker resets parents to {"Global"} at the end of the inner backward and
        # then fails when the running module's forward ends.
        state = _Log()
        mod = GradInForward(state)
        with pytest.raises(RuntimeError, match="hierarchy tracking is wrong"):
            with TorchModTracker() as tracker:
                state.tracker = tracker
                mod(torch.randn(1, 2, requires_grad=True) * 1)


class MaybeFailingBackward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)
        self.fail = True

    def forward(self, x):
        h = self.a(x)
        if self.fail:
            h.register_hook(lambda grad: (_ for _ in ()).throw(ValueError("backward failed")))
        return self.b(h)


@PAIRS
def test_backward_that_raises_does_not_leave_stale_parents(ours):
    net = MaybeFailingBackward()
    with ours() as tracker:
        with pytest.raises(ValueError):
            net(torch.randn(1, 2)).sum().backward()
        net.fail = False
        seen = []
        net.b.register_forward_pre_hook(lambda m, i: seen.append(sorted(tracker.parents)))
        net(torch.randn(1, 2)).sum().backward()
        # torch's trackers keep the failed backward's modules here, forever (their end-of-backward
        # callback is believed queued); fqntrace's notice it at the next forward.
        assert seen == [["Global", "MaybeFailingBackward", "MaybeFailingBackward.b"]]
        assert tracker.parents == {"Global"}


@PAIRS
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_no_grad_and_inference_mode_forwards(ours, mode):
    net = Bar()
    with ours() as tracker:
        seen = []
        net.foo.register_forward_pre_hook(
            lambda m, i: seen.append((sorted(tracker.parents), tracker.is_bw))
        )
        with mode():
            out = net(torch.rand(3, 10))
        assert not out.requires_grad
        assert seen == [(["Bar", "Bar.foo", "Global"], False)]
        assert tracker.parents == {"Global"} and not tracker.is_bw
        net(torch.rand(3, 10, requires_grad=True)).sum().backward()
        assert tracker.parents == {"Global"} and not tracker.is_bw


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_user_hooks_after_no_grad_forward(mode):
    def run(tracker_cls, mode):
        tracker, log = tracker_cls(), []
        record_user_hooks(tracker, log)
        net = Bar()
        with tracker:
            if mode is not None:
                with mode():
                    net(torch.rand(3, 10))
            del log[:]
            net(torch.rand(3, 10)).sum().backward()
        return log

    ours, clean = run(fqntrace.ModTracker, mode), run(fqntrace.ModTracker, None)
    stale = [("post_bw", "Bar.foo", False, True), ("post_bw", "Bar", False, True)]
    if mode is torch.no_grad:
        # Both ModTrackers close the no-grad forward's modules at the next backward's end.
        assert ours == run(TorchModTracker, mode) == clean + stale
    else:
        # Under inference mode there can be no backward of that forward, so nothing is queued
        # (torch's ModTracker queues it anyway and fires post_bw for it at the next backward).
        assert ours == clean
        assert run(TorchModTracker, mode) == clean + stale


@PAIRS
def test_stays_out_of_compiled_modules(ours):
    # What torch.compile(module) sets while the compiled module runs; torch's ModTracker stays
    # out then, torch's ModuleTracker breaks dynamo's tracing. Both of ours stay out.
    from torch._dynamo.eval_frame import _set_in_optimized_module

    mod, seen = Bar(), []
    with ours() as tracker:
        mod.foo.register_forward_pre_hook(lambda m, i: seen.append(sorted(tracker.parents)))
        with _set_in_optimized_module():
            mod(torch.rand(1, 10, requires_grad=True)).sum().backward()
        mod(torch.rand(1, 10, requires_grad=True)).sum().backward()
    assert seen == [["Global"], ["Bar", "Bar.foo", "Global"]]
    assert tracker.parents == {"Global"}


# --- names and get_module --------------------------------------------------------------------


def test_get_known_fqn_and_get_module_round_trip():
    state = {"fw": [], "bw": []}
    model = Mod(state)
    torch_tracker = TorchModTracker()
    with torch_tracker:
        state["tracker"] = torch_tracker
        model({"a": torch.randn(3, 3, requires_grad=True).clone()})["a"].sum().backward()
    tracker = fqntrace.ModTracker()
    with tracker:
        state["tracker"] = tracker
        model({"a": torch.randn(3, 3, requires_grad=True).clone()})["a"].sum().backward()

    fqns = []
    for _, module in model.named_modules():
        fqn = tracker.get_known_fqn(module)
        assert fqn == torch_tracker.get_known_fqn(module)
        assert tracker.get_module(fqn) is module
        fqns.append(fqn)
    # Containers that never ran (ModuleDict, ModuleList) round-trip too.
    assert fqns == ["Mod", "Mod.a", "Mod.b", "Mod.b.nest", "Mod.c", "Mod.c.0"]
    assert tracker.get_module("Mod.nope") is None
    assert tracker.get_known_fqn(nn.Linear(1, 1)) is None

    del model, module, state
    gc.collect()
    assert tracker.get_module("Mod.a") is None  # weak: dead modules are not kept alive


def test_names_are_shared_with_fqntrace_not_per_tracker():
    model = Bar()
    with fqntrace.ModTracker():
        model(torch.rand(1, 10))
    seen = []
    with fqntrace.ModTracker() as tracker:
        model.foo.register_forward_pre_hook(lambda m, i: seen.append(sorted(tracker.parents)))
        model.foo(torch.rand(1, 10))  # called alone in a fresh tracker
        assert tracker.get_module("Bar.foo") is model.foo
    # torch's tracker starts from scratch and would call it "Linear"; fqntrace keeps the name it
    # has in traces.
    assert seen == [["Bar.foo", "Global"]]
    with fqntrace.ModuleTracker() as module_tracker:
        model.foo.register_forward_pre_hook(
            lambda m, i: seen.append(sorted(module_tracker.parents))
        )
        model.foo(torch.rand(1, 10))
    assert seen[-1] == ["Bar.foo", "Global"]


def test_module_tracker_hooks_are_inert_after_exit():
    mod = nn.Linear(2, 2)
    for tracker_cls in (fqntrace.ModuleTracker, TorchModuleTracker):
        with tracker_cls() as tracker:
            out = mod(torch.rand(1, 2, requires_grad=True))
        seen = []
        out.register_hook(lambda g: seen.append(set(tracker.parents)))
        out.sum().backward()
        assert seen == [{"Global"}], tracker_cls


# --- with a trace --------------------------------------------------------------------------


def test_fqns_agree_with_a_trace(tmp_path):
    state = {"fw": [], "bw": []}
    model = Mod(state)
    reported = set()
    tracker = fqntrace.ModTracker()
    tracker.register_user_hooks(
        pre_fw_hook=lambda m, i: reported.update(tracker.parents),
        post_fw_hook=lambda m, i, o: reported.update(tracker.parents),
    )
    path = tmp_path / "t.json"
    with fqntrace.profile(str(path)):
        with tracker:
            state["tracker"] = tracker
            for _ in range(2):
                model({"a": torch.randn(4, 4, requires_grad=True).clone()})["a"].sum().backward()
            assert tracker.parents == {"Global"}
    with open(path) as f:
        trace = json.load(f)
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    module_fqns = {e["args"]["fqn"] for e in spans if "module_type" in e.get("args", {})}
    reported.discard("Global")
    assert reported == {"Mod", "Mod.a", "Mod.b.nest", "Mod.c.0"}
    assert reported <= module_fqns
    assert {
        e["args"]["fqn"]
        for e in spans
        if "module_type" in e["args"] and e["args"]["phase"] == "forward"
    } == reported
    # What the tracker saw in backward is what the trace attributes backward work to.
    backward_fqns = {e["args"]["fqn"] for e in spans if e["args"].get("phase") == "backward"}
    seen_bw = set().union(*(parents for parents, _ in state["bw"])) - {"Global", "Mod"}
    assert seen_bw == {"Mod.a", "Mod.b.nest", "Mod.c.0"} <= backward_fqns


# --- overhead (not a test): .venv/bin/python tests/python/test_mod_tracker.py [n_modules] -------


def bench(n_modules=200, rounds=15, steps=5):
    """Median ms per forward+backward of a Sequential of `n_modules` tiny Linear modules, per
    tracker; rounds interleave the variants so machine noise hits them alike."""
    import statistics
    import time

    torch.set_num_threads(1)
    x = torch.randn(4, 8)
    variants = {
        "no tracker": None,
        "torch ModTracker": TorchModTracker,
        "fqntrace.ModTracker": fqntrace.ModTracker,
        "torch ModuleTracker": TorchModuleTracker,
        "fqntrace.ModuleTracker": fqntrace.ModuleTracker,
    }
    setups = {
        name: (nn.Sequential(*[nn.Linear(8, 8) for _ in range(n_modules)]), cls() if cls else None)
        for name, cls in variants.items()
    }
    times = {name: [] for name in variants}
    for r in range(rounds + 1):  # round 0 warms up
        for name, (model, tracker) in setups.items():
            start = time.perf_counter()
            for _ in range(steps):
                if tracker is None:
                    model(x).sum().backward()
                else:
                    with tracker:
                        model(x).sum().backward()
            if r:
                times[name].append((time.perf_counter() - start) / steps * 1e3)
    base = statistics.median(times["no tracker"])
    for name in variants:
        median = statistics.median(times[name])
        print(f"{name:24s} {median:7.2f} ms/step  (+{median - base:6.2f} ms over no tracker)")


if __name__ == "__main__":
    import sys

    bench(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
