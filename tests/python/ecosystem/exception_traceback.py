"""An exception raised in a nested forward: the traceback the user sees, and the forward stack
that anomaly mode prints with a backward error."""

import traceback
import warnings

import torch
from torch import nn


class Inner(nn.Module):
    def forward(self, x):
        raise ValueError("bad input shape")


class Middle(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.middle = Middle()

    def forward(self, x):
        return self.middle(x)


try:
    Outer()(torch.ones(2))
except ValueError:
    traceback.print_exc(file=__import__("sys").stdout)


class Sqrt(nn.Module):
    def forward(self, x):
        return x.sqrt()


class Wrap(nn.Module):
    def __init__(self):
        super().__init__()
        self.sqrt = Sqrt()

    def forward(self, x):
        return self.sqrt(x)


warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    with torch.autograd.detect_anomaly():
        x = torch.zeros(3, requires_grad=True)
        try:
            Wrap()(x).sum().backward()
        except RuntimeError as error:
            print("backward error:", str(error).splitlines()[0])
for w in caught:
    text = str(w.message)
    # The forward stack anomaly mode recorded when the node was made.
    print("anomaly warning:", "\n".join(line for line in text.splitlines() if "File" in line))
