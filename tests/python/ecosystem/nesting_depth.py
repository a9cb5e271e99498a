"""The deepest chain of nested modules whose forward runs under the default recursion limit."""

import sys

import torch
from torch import nn


class Chain(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.next = Chain(depth - 1) if depth > 1 else nn.Identity()

    def forward(self, x):
        return self.next(x)


def runs(depth):
    try:
        Chain(depth)(torch.ones(1))
        return True
    except RecursionError:
        return False


lo, hi = 1, 1000
while lo < hi:
    mid = (lo + hi + 1) // 2
    if runs(mid):
        lo = mid
    else:
        hi = mid - 1
print("deepest nesting:", lo, "recursion limit:", sys.getrecursionlimit())
