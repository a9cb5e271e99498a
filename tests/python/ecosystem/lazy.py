"""Lazy modules: parameters are UninitializedParameter until the first forward."""

import torch
from _common import final_pass, show
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.LazyLinear(3))
x = torch.randn(4, 10)
model(x).sum().backward()
show("shape", tuple(model[0].weight.shape))
model.zero_grad()
loss = final_pass(model, lambda: model(x).pow(2).sum())
loss.backward()
show("loss", loss)
show("grad", model[2].weight.grad)
