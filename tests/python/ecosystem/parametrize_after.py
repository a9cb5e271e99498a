"""torch.nn.utils.parametrize registered after a warm-up: the parametrization modules are named
under the module they parametrize (MLP.fc1.parametrizations.weight.0)."""

import torch
from _common import final_pass, show
from torch import nn
from torch.nn.utils import parametrize


class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(0, 1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


torch.manual_seed(0)
mlp = MLP()
x = torch.randn(3, 6)
mlp(x).sum().backward()
parametrize.register_parametrization(mlp.fc1, "weight", Symmetric())
loss = final_pass(mlp, lambda: mlp(x).pow(2).sum())
loss.backward()
show("loss", loss)
show("grad", mlp.fc1.parametrizations.weight.original.grad)
show("class", type(mlp.fc1).__name__)
