"""A program drawn at random from a seed, for the randomized validity test
(tests/python/test_random_programs.py): a module tree (depth, shared modules, ModuleList and
ModuleDict, custom blocks) and a mix of features (forward hooks, activation checkpointing,
no_grad, a torch.compile region, torch.export, torch.jit.script, a forward on another thread, an
exception raised in forward and caught), run forward and backward.

    python tests/python/random_program.py SEED NAMES_JSON

writes to NAMES_JSON what a fresh torch ModTracker knows: the names of the modules whose forward
ran ("ran") and every name the trees' modules can have ("possible": the root's class name, each
path below it). Run it with FQNTRACE set to trace it; the test checks the trace against these.
"""

import json
import random
import sys
import threading
import warnings

import torch
from torch import nn
from torch.distributed._tools.mod_tracker import ModTracker
from torch.utils.checkpoint import checkpoint

DIM = 8
FEATURES = ("hooks", "checkpoint", "no_grad", "compile", "export", "script", "thread", "raises")


class Block(nn.Module):
    """A custom module: runs its children in order, some through checkpoint; may raise."""

    def __init__(self, children, checkpointed, raises):
        super().__init__()
        self.parts = nn.ModuleList(children)
        self.checkpointed = checkpointed
        self.raises = raises

    def forward(self, x):
        if self.raises and x.shape[0] == 3:  # only the program's "bad batch"
            raise ValueError("bad batch")
        for k, part in enumerate(self.parts):
            if self.checkpointed and k % 2 == 0 and torch.is_grad_enabled():
                x = checkpoint(part, x, use_reentrant=bool(k % 4))
            else:
                x = part(x)
        return x


class Branches(nn.Module):
    """A ModuleDict whose values all run, summed."""

    def __init__(self, children):
        super().__init__()
        self.branches = nn.ModuleDict({f"b{k}": c for k, c in enumerate(children)})

    def forward(self, x):
        return sum(branch(x) for branch in self.branches.values())


class Scriptable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, DIM)
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x):
        return self.norm(torch.relu(self.fc(x)))


class Exportable(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(DIM, DIM), nn.Tanh())
        self.out = nn.Linear(DIM, DIM)

    def forward(self, x):
        return self.out(self.inner(x))


class Program:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.features = {f for f in FEATURES if self.rng.random() < 0.4}
        self.made = []  # modules made so far: candidates for sharing

    def leaf(self):
        kind = self.rng.choice(("linear", "linear", "relu", "norm", "gelu"))
        return {
            "linear": lambda: nn.Linear(DIM, DIM),
            "relu": nn.ReLU,
            "norm": lambda: nn.LayerNorm(DIM),
            "gelu": nn.GELU,
        }[kind]()

    def tree(self, depth):
        if self.made and self.rng.random() < 0.15:
            return self.rng.choice(self.made)  # shared: one module under two parents
        if depth == 0 or self.rng.random() < 0.25:
            module = self.leaf()
        else:
            children = [self.tree(depth - 1) for _ in range(self.rng.randint(1, 3))]
            kind = self.rng.choice(("sequential", "block", "branches"))
            if kind == "sequential":
                module = nn.Sequential(*children)
            elif kind == "branches":
                module = Branches(children)
            else:
                module = Block(
                    children,
                    "checkpoint" in self.features and self.rng.random() < 0.5,
                    "raises" in self.features and self.rng.random() < 0.3,
                )
        self.made.append(module)
        return module

    def build(self):
        root = Block(
            [self.tree(self.rng.randint(1, 4)) for _ in range(self.rng.randint(1, 3))], False, False
        )
        if "compile" in self.features:
            k = self.rng.randrange(len(root.parts))
            root.parts[k] = torch.compile(root.parts[k], backend="eager")
        if "script" in self.features:
            root.parts.append(torch.jit.script(Scriptable()))
        if "export" in self.features:
            x = torch.randn(2, DIM)
            batch = torch.export.Dim("batch")  # the "bad batch" of 3 passes its guards
            exported = torch.export.export(Exportable(), (x,), dynamic_shapes=({0: batch},))
            root.parts.append(exported.module())
        if "hooks" in self.features:
            hookable = [m for m in root.modules() if not isinstance(m, torch.jit.ScriptModule)]
            for module in self.rng.sample(hookable, min(3, len(hookable))):
                module.register_forward_hook(lambda m, i, o: None)
                module.register_forward_pre_hook(lambda m, i: None)
        return root


def possible_names(root):
    """Every name a fresh ModTracker can give a module of the tree: root = class name, then
    each path (shared modules have several; torch.compile's _orig_mod takes its wrapper's)."""
    base = type(root).__name__
    names = {base}
    for path, _ in root.named_modules(remove_duplicate=False):
        if path:
            names.add(base + "." + path.replace("._orig_mod", ""))
    return names


def main(seed, out):
    torch.manual_seed(seed)
    # torch.compile warns that the tracker's global hooks fire twice for its wrapper: expected
    warnings.filterwarnings("ignore", message="Using `torch.compile")
    program = Program(seed)
    root = program.build()
    ran = set()
    tracker = ModTracker()
    tracker.register_user_hooks(pre_fw_hook=lambda m, _inputs: ran.add(tracker.get_known_fqn(m)))
    x = torch.randn(2, DIM, requires_grad=True)  # a backward even through a tree without weights
    with tracker:
        root(x).sum().backward()
        if "no_grad" in program.features:
            with torch.no_grad():
                root(x)
        if "raises" in program.features:
            try:
                root(torch.randn(3, DIM, requires_grad=True)).sum().backward()
            except ValueError:
                pass
        if "thread" in program.features:
            worker = threading.Thread(target=lambda: root(x).sum().backward())
            worker.start()
            worker.join()
        root(x).sum().backward()
    ran.discard(None)
    with open(out, "w") as f:
        json.dump(
            {
                "features": sorted(program.features),
                "ran": sorted(ran),
                "possible": sorted(possible_names(root)),
            },
            f,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
