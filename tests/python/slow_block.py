"""Real runs for the diff and report tests: a small stack of blocks, traced with
fqntrace.profile, where one block can be made slower on purpose by an extra matmul."""

import os

import fqntrace
import torch
from torch import nn

SLOW_BLOCK = "Net.blocks.2"
EXTRA_MATMULS = 4


class Block(nn.Module):
    def __init__(self, dim, slow=False):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)
        self.slow = slow
        # The extra work: matmuls far bigger than the block's own (~1 GFLOP each), so the change
        # stands out of the scheduling noise of a loaded machine.
        self.register_buffer("pad", torch.randn(512, 1024))
        self.register_buffer("weight", torch.randn(1024, 1024))

    def forward(self, x):
        if self.slow:
            for _ in range(EXTRA_MATMULS):
                torch.mm(self.pad, self.weight)
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self, dim=64, blocks=4, slow_block=None):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, slow=(i == slow_block)) for i in range(blocks))
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Other(nn.Module):
    """A different model, for 'diff refuses to compare different models'."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 1)

    def forward(self, x):
        return self.proj(x)


def train(model, path, steps=3, inputs=None, step_ranges=False, formats=None):
    """A few training steps, the first one untraced (warm-up); returns the trace path.
    step_ranges: each step is a training step (ProfilerStep#N ranges: fqntrace ends a step at
    every optimizer step); without, the parameters are updated by hand, so no step is seen.
    formats: FQNTRACE_FORMATS for this session (e.g. "summary": <stem>.summary.json too)."""
    torch.manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = inputs if inputs is not None else torch.randn(32, model_dim(model))

    def step():
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if step_ranges:
            optimizer.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p -= 0.01 * p.grad

    # One intra-op thread: a multi-threaded op on a loaded machine waits for its slowest
    # (preempted) thread, which puts noise of hundreds of ms on tiny ops.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    saved_formats = os.environ.pop("FQNTRACE_FORMATS", None)
    if formats:
        os.environ["FQNTRACE_FORMATS"] = formats
    try:
        step()
        with fqntrace.profile(str(path)) as written:
            for _ in range(steps):
                step()
    finally:
        torch.set_num_threads(threads)
        os.environ.pop("FQNTRACE_FORMATS", None)
        if saved_formats is not None:
            os.environ["FQNTRACE_FORMATS"] = saved_formats
    return written


def model_dim(model):
    first = next(m for m in model.modules() if isinstance(m, nn.Linear))
    return first.in_features
