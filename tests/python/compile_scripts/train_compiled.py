"""Trains a small model for a few steps under torch.compile and prints, as one JSON line, what
Dynamo counted (graphs, graph breaks, recompiles) and the losses: run traced and untraced, the
two lines must agree (tests/python/test_compile.py).

    python train_compiled.py --form whole|child|method|function [--backend B] [--fullgraph]
                             [--dynamic] [--graph-break] [--checkpoint] [--model mlp|gpt2]
    python train_compiled.py --cases '{"NAME": [ARGS...], ...}'

--cases runs several cases one after the other in this interpreter (Dynamo reset between them,
its counters cleared): one line per case, with "case": NAME, and the steps' ranges named
"NAME step<i>". One interpreter for every case spares each its own start (torch, transformers).
"""

import argparse
import json
import sys

import torch
import torch.nn as nn
import torch.utils.checkpoint


class Block(nn.Module):
    def __init__(self, d, graph_break=False, checkpoint=False):
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.graph_break = graph_break
        self.checkpoint = checkpoint

    def mlp(self, x):
        h = torch.relu(self.fc1(x))
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.fc2(h)

    def forward(self, x):
        if self.checkpoint:
            return x + torch.utils.checkpoint.checkpoint(self.mlp, x, use_reentrant=False)
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self, d=16, graph_break=False, checkpoint=False):
        super().__init__()
        self.blocks = nn.ModuleList(
            Block(d, graph_break and i == 1, checkpoint and i == 1) for i in range(3)
        )
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, attn_implementation="eager"
    )
    return GPT2LMHeadModel(config).train()


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--form", default="whole", choices=["whole", "child", "method", "function"])
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--fullgraph", action="store_true")
    parser.add_argument("--dynamic", action="store_true")
    parser.add_argument("--graph-break", action="store_true")
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("--model", default="mlp", choices=["mlp", "gpt2"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--cases", help="JSON: {name: [args...]}, run in turn")
    return parser.parse_args(argv)


def run(args, name=None):
    torch.manual_seed(0)
    net = (
        gpt2()
        if args.model == "gpt2"
        else Net(graph_break=args.graph_break, checkpoint=args.checkpoint)
    )
    options = {
        "backend": args.backend,
        "fullgraph": args.fullgraph,
        "dynamic": True if args.dynamic else None,
    }
    model = net
    if args.form == "whole":
        model = torch.compile(net, **options)
    elif args.form == "child":
        net.blocks[1] = torch.compile(net.blocks[1], **options)
    elif args.form == "method":
        net.blocks[1].compile(**options)
    step_fn = None
    if args.form == "function":

        def step(x):
            return model(x).sum()

        step_fn = torch.compile(step, **options)

    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses = []
    for i in range(args.steps):
        # --dynamic: the batch changes size, so a dynamic graph serves every step.
        batch = 8 + (2 * i if args.dynamic else 0)
        step_name = f"step{i}" if name is None else f"{name} step{i}"
        with torch.autograd.profiler.record_function(step_name):
            if args.model == "gpt2":
                ids = torch.randint(0, 100, (2, 16))
                loss = model(ids, labels=ids).loss
            else:
                x = torch.randn(batch, 16)
                loss = step_fn(x) if step_fn else model(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(loss.item())

    from torch._dynamo.utils import counters

    seen = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "recompiles": sum(counters["recompiles"].values()),
        "frames_ok": counters["frames"]["ok"],
        "losses": losses,
    }
    if name is not None:
        seen["case"] = name
    print(json.dumps(seen), flush=True)


def main():
    args = parse(sys.argv[1:])
    if args.cases is None:
        run(args)
        return
    from torch._dynamo.utils import counters

    for name, case_args in json.loads(args.cases).items():
        torch._dynamo.reset()  # each case compiles from nothing, as in an interpreter of its own
        counters.clear()
        run(parse(case_args), name)


if __name__ == "__main__":
    main()
