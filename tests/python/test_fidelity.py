"""Per-op fidelity on real models: every op fqntrace records must carry the fqn and phase that an
independent oracle built from torch's own hooks (tests/python/oracle.py) expects.

Each model runs forward + backward three times with the same seed and fresh gradients: once plain
(first-call effects: lazy buffers, caches), once under the oracle, once under fqntrace.profile.
The oracle's ops (and autograd node ranges) must appear, per thread and in start order, as a
subsequence of the trace's cpu_op events with the same (name, fqn, phase): 100% agreement. Ops the
oracle cannot see must carry the attribution of the op that encloses them in the trace.

Intended differences, each documented where it is handled and shown here with and without a
dispatch mode:
- oracle.MODE_DETACH: aten::detach calls that exist only because the oracle's dispatch mode is on;
  left out of the matching (each test asserts nothing else was left out);
- oracle.SAME_OP / canonical(): ops ATen renames under a mode (reshape's view, in-place vs
  out-of-place); compared under one name;
- ops run by a saved-tensor pack hook start inside the op they save for; matched in that window.

Known disagreements of the core are in KNOWN_WRONG: still asserted in full, marked xfail(strict).
"""

import json
import time
import warnings

import fqntrace
import pytest
import torch
import torch.nn.functional as F
from oracle import (
    ENGINE_WRAPPER,
    MODE_DETACH,
    UNKNOWN_NODE,
    Oracle,
    canonical,
    describe,
    inheritance_breaks,
    match,
    run_oracle,
    trace_ops,
)
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

AGREEMENT = {}  # model -> (matched, total, artifacts, seconds), printed at the end of the module


# --- models ------------------------------------------------------------------------------------
# Each factory returns (model, step); step() runs one forward + backward.


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=100,
        n_positions=32,
        bos_token_id=99,
        eos_token_id=99,
    )
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 100, (2, 8))
    return model, lambda: model(input_ids=ids, labels=ids).loss.backward()


def bert():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    config._attn_implementation = "eager"
    model = BertForMaskedLM(config).train()
    ids = torch.randint(0, 100, (2, 8))
    labels = torch.where(torch.rand(2, 8) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]  # at least one masked position
    return model, lambda: model(input_ids=ids, labels=labels).loss.backward()


def transformer_encoder():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "enable_nested_tensor is True, but ..."
        model = nn.TransformerEncoder(layer, num_layers=2).train()
    x = torch.randn(2, 5, 16)
    return model, lambda: model(x).pow(2).mean().backward()


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids, targets):
        hidden, _ = self.lstm(self.embed(ids))
        logits = self.head(hidden)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def lstm_lm():
    model = LSTMLanguageModel().train()
    ids, targets = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 5))
    return model, lambda: model(ids, targets).backward()


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(8, 5)

    def forward(self, x):
        return self.classifier(self.features(x))


def conv_bn():
    model = ConvNet().train()
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 3])
    return model, lambda: F.cross_entropy(model(x), y).backward()


class Expert(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class MixtureOfExperts(nn.Module):
    """Top-1 gating: each token goes to its best expert (index_select / index_add); tokens whose
    gate is unsure keep their input (torch.where)."""

    def __init__(self, dim=8, experts=3):
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(Expert(dim) for _ in range(experts))
        self.used = []

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        weight, choice = probs.max(-1)
        out = torch.zeros_like(x)
        self.used = []
        for e, expert in enumerate(self.experts):
            rows = (choice == e).nonzero().squeeze(1)
            if rows.numel() == 0:  # data-dependent: an expert nobody chose does not run
                continue
            self.used.append(e)
            y = expert(x.index_select(0, rows)) * weight.index_select(0, rows).unsqueeze(1)
            out = out.index_add(0, rows, y)
        return torch.where((weight > 0.4).unsqueeze(1), out, x)


class MoEModel(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.moe = MixtureOfExperts(dim)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        return self.head(self.moe(self.proj(x)))


def moe():
    model = MoEModel().train()
    x = torch.randn(16, 8) * 3
    step = lambda: model(x).pow(2).mean().backward()  # noqa: E731
    step()
    assert len(model.moe.used) >= 2, "the routing should spread tokens over several experts"
    return model, step


class TiedLM(nn.Module):
    def __init__(self, vocab=40, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied: AccumulateGrad belongs to `embed`

    def forward(self, ids):
        return self.head(self.body(self.embed(ids)))


def tied():
    model = TiedLM().train()
    ids = torch.randint(0, 40, (2, 6))
    return model, lambda: F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()


class CalledTwice(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.shared = nn.Linear(dim, dim)
        self.act = nn.ReLU()
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        return self.out(self.shared(self.act(self.shared(x))))


def called_twice():
    model = CalledTwice().train()
    x = torch.randn(4, 8)
    return model, lambda: model(x).sum().backward()


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Checkpointed(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(2))
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x)


def checkpointed():
    model = Checkpointed().train()
    x = torch.randn(4, 8)
    return model, lambda: model(x).pow(2).mean().backward()


class Critic(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, 1))

    def forward(self, x):
        return self.net(x)


def gradient_penalty():
    """WGAN-GP style double backward: the gradient of the critic's output with respect to its
    input is taken with create_graph=True, so the first backward creates nodes (MmBackward0,
    TanhBackwardBackward0, ...) that the second backward runs. They belong to the module their
    creating ops are attributed to (the net.0 / net.1 / net.2 whose backward made them)."""
    model = Critic().train()
    x = torch.randn(4, 8, requires_grad=True)

    def step():
        x.grad = None
        out = model(x)
        (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        (out.mean() + grad.pow(2).sum()).backward()

    return model, step


MODELS = {
    "gpt2": gpt2,
    "bert": bert,
    "transformer_encoder": transformer_encoder,
    "lstm_lm": lstm_lm,
    "conv_bn": conv_bn,
    "moe": moe,
    "tied_weights": tied,
    "module_called_twice": called_twice,
    "checkpointed_blocks": checkpointed,
    "gradient_penalty": gradient_penalty,
}
# Disagreements of fqntrace's core, reported to its owner; each stays asserted in full.
KNOWN_WRONG = {}


# --- the comparison ----------------------------------------------------------------------------
def oracle_and_trace(factory, path):
    """(oracle ops, Chrome trace) for one forward + backward of the model."""
    torch.manual_seed(0)
    model, step = factory()
    step()  # warm-up, outside both passes

    def one_step():
        torch.manual_seed(1)
        model.zero_grad(set_to_none=True)
        step()

    ops = run_oracle(one_step)
    with fqntrace.profile(str(path)) as expanded:
        one_step()
    with open(expanded) as f:
        return ops, json.load(f)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[name]))
        if name in KNOWN_WRONG
        else name
        for name in MODELS
    ],
)
def test_every_op_has_the_oracles_fqn_and_phase(name, tmp_path, record_property):
    start = time.perf_counter()
    ops, chrome = oracle_and_trace(MODELS[name], tmp_path / "trace.json")
    result = match(ops, trace_ops(chrome))
    AGREEMENT[name] = (
        result.matched,
        result.total,
        len(result.artifacts),
        time.perf_counter() - start,
    )
    record_property("agreement", f"{result.matched}/{result.total}")

    # The oracle attributes every op itself (no node it did not see created)...
    unknown = [op for op in ops if op.fqn is None]
    assert not unknown, unknown[:5]
    # ...and the only ops it leaves out are its own dispatch mode's detaches.
    assert {(op.name, op.artifact) for op in result.artifacts} <= {("aten::detach", MODE_DETACH)}
    # The model really did forward and backward work under modules.
    phases = {op.phase for op in ops}
    assert {"forward", "backward"} <= phases
    if name == "checkpointed_blocks":
        assert "recompute" in phases
    assert result.total > 20

    assert result.matched == result.total, describe(result)
    # The ops the oracle cannot see carry the attribution of the op enclosing them.
    breaks = inheritance_breaks(chrome)
    assert not breaks, breaks[:10]


# --- the comparison itself is not vacuous -------------------------------------------------------
def _mutate(trace, pick, **changes):
    n = 0
    for events in trace.values():
        for i, t in enumerate(events):
            if pick(t):
                events[i] = t._replace(**changes)
                n += 1
    assert n, "the mutation should change some events"


# Each: a model, which trace events to falsify, how; the oracle must then miss exactly those ops.
MUTATIONS = {
    "backward op given to another module": (
        called_twice,
        lambda t: t.name == "aten::mm" and t.fqn == "CalledTwice.shared" and t.phase == "backward",
        {"fqn": "CalledTwice.out"},
    ),
    "recompute reported as backward": (
        checkpointed,
        lambda t: t.name == "aten::addmm" and t.phase == "recompute",
        {"phase": "backward"},
    ),
    "tied weight accumulated into its second owner": (
        tied,
        lambda t: t.name == "torch::autograd::AccumulateGrad" and t.fqn == "TiedLM.embed",
        {"fqn": "TiedLM.head"},
    ),
    "forward op given to the parent module": (
        moe,
        lambda t: (
            t.name == "aten::addmm"
            and t.fqn == "MoEModel.moe.experts.0.fc1"
            and t.phase == "forward"
        ),
        {"fqn": "MoEModel.moe.experts.0"},
    ),
    "gradient summed by the engine given to Global": (
        called_twice,
        lambda t: t.name == "aten::add" and t.phase == "backward",
        {"fqn": "Global"},
    ),
    "autograd node given to Global": (
        gpt2,
        lambda t: t.name == "NativeLayerNormBackward0",
        {"fqn": "Global"},
    ),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_falsified_trace_disagrees(mutation, tmp_path):
    factory, pick, changes = MUTATIONS[mutation]
    ops, chrome = oracle_and_trace(factory, tmp_path / "trace.json")
    trace = trace_ops(chrome)
    before = match(ops, trace)
    assert before.matched == before.total, describe(before)
    picked = {t.name for events in trace.values() for t in events if pick(t)}
    _mutate(trace, pick, **changes)
    after = match(ops, trace)
    assert after.matched < after.total
    assert {op.name for op, _ in after.misses} <= {canonical(n) for n in picked} | picked


def test_oracle_sees_recompute_and_accumulate_grad_owners():
    torch.manual_seed(0)
    model, step = tied()
    with Oracle() as oracle:
        step()
    acc = {op.fqn for op in oracle.ops if op.why == "AccumulateGrad owner"}
    # embed.weight is tied to head.weight: its first owner in named_modules() order is embed.
    assert acc == {"TiedLM.embed", "TiedLM.body.0"}
    assert not any(UNKNOWN_NODE in op.why for op in oracle.ops)

    model, step = checkpointed()
    with Oracle() as oracle:
        step()
    recompute = {op.fqn for op in oracle.ops if op.phase == "recompute"}
    assert recompute == {
        "Checkpointed.blocks.0",
        "Checkpointed.blocks.0.norm",
        "Checkpointed.blocks.0.fc1",
        "Checkpointed.blocks.0.fc2",
        "Checkpointed.blocks.1",
        "Checkpointed.blocks.1.norm",
        "Checkpointed.blocks.1.fc1",
        "Checkpointed.blocks.1.fc2",
    }
    # checkpoint's pack hook detaches what the recompute saves, inside the op that saves it.
    assert any(op.in_pack_hook and op.phase == "recompute" for op in oracle.ops)


# --- the intended differences are the dispatch mode's doing ------------------------------------
class _EmptyMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _traced_names(fn, path, under_mode):
    with fqntrace.profile(str(path)) as expanded:
        if under_mode:
            with _EmptyMode():
                fn()
        else:
            fn()
    with open(expanded) as f:
        return {t.name for ops in trace_ops(json.load(f)).values() for t in ops}


_x = lambda: torch.randn(2, 3, 4, requires_grad=True)  # noqa: E731
# (snippet, [(name without a mode, name under a mode)]): oracle.SAME_OP and canonical() exist for
# exactly these pairs.
MODE_RENAMES = {
    # A reshape that can be a view of a non-contiguous tensor.
    "reshape": (
        lambda: (
            torch.randn(2, 2, 3, 4, requires_grad=True)
            .transpose(-1, -2)
            .reshape(4, 4, 3)
            .sum()
            .backward()
        ),
        [("aten::_reshape_alias", "aten::view"), ("ReshapeAliasBackward0", "ViewBackward0")],
    ),
    "linear bias on 3-d input": (
        lambda: (
            F.linear(_x().transpose(0, 1), torch.randn(5, 4), torch.randn(5, requires_grad=True))
            .sum()
            .backward()
        ),
        [("aten::add_", "aten::add")],
    ),
    "engine sums two gradients": (
        lambda: (lambda y: (y * y).sum().backward())(_x() * 2),
        [("aten::add_", "aten::add")],
    ),
    "index_select backward": (
        lambda: _x().index_select(1, torch.tensor([0, 2])).sum().backward(),
        [("aten::index_add_", "aten::index_add")],
    ),
    "max backward": (
        lambda: _x().max(-1)[0].sum().backward(),
        [("aten::zeros", "aten::new_zeros"), ("aten::scatter_", "aten::scatter")],
    ),
}


@pytest.mark.parametrize("snippet", list(MODE_RENAMES))
def test_renamed_ops_are_renamed_by_the_dispatch_mode(snippet, tmp_path):
    fn, renames = MODE_RENAMES[snippet]
    plain = _traced_names(fn, tmp_path / "plain.json", under_mode=False)
    moded = _traced_names(fn, tmp_path / "mode.json", under_mode=True)
    for without, under in renames:
        assert without in plain and without not in moded, (without, plain, moded)
        assert under in moded, (under, moded)
        assert canonical(without) == canonical(under)
        assert canonical(ENGINE_WRAPPER + without) == canonical(ENGINE_WRAPPER + under)


# The other intended difference: the detaches the oracle leaves out exist only under a mode.
def test_mode_detaches_do_not_exist_without_a_mode(tmp_path):
    x = torch.randn(3, requires_grad=True)
    with fqntrace.profile(str(tmp_path / "plain.json")) as path:
        x.relu().sum().backward()  # relu saves its output
    with open(path) as f:
        names = [t.name for ops in trace_ops(json.load(f)).values() for t in ops]
    assert "aten::relu" in names
    # The only detach is AccumulateGrad's; the output saved by relu is copied silently.
    assert names.count("aten::detach") == 1
    x.grad = None
    ops = run_oracle(lambda: x.relu().sum().backward())
    artifacts = [op for op in ops if op.artifact]
    # One when ReluBackward0's output is saved in forward, one when it is unpacked in backward.
    assert [(op.name, op.phase) for op in artifacts] == [
        ("aten::detach", "forward"),
        ("aten::detach", "backward"),
    ]
    assert [op.why for op in ops if op.name == "aten::detach" and not op.artifact] == [
        "AccumulateGrad of a leaf no module owns"
    ]


def teardown_module(module):
    if AGREEMENT:
        lines = [
            f"  {name:22s} {m}/{t} ops agree ({a} mode-only detaches left out), {s:.2f} s"
            for name, (m, t, a, s) in AGREEMENT.items()
        ]
        print("\nfqntrace fidelity against the oracle:\n" + "\n".join(lines))
