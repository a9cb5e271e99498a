"""Saving and loading a whole module (pickle), deepcopy, state_dict round trips, assign=True."""

import copy
import io
import warnings

import torch
from _common import final_pass, show
from torch import nn

warnings.simplefilter("always")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 2))
x = torch.randn(3, 6)
model(x).sum().backward()
buffer = io.BytesIO()
torch.save(model, buffer)
buffer.seek(0)
loaded = torch.load(buffer, weights_only=False)
twin = copy.deepcopy(model)
fresh = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 2))
fresh.load_state_dict(model.state_dict(), assign=True)
for name, m in (("loaded", loaded), ("twin", twin), ("fresh", fresh)):
    show(name, m(x))
loss = final_pass(twin, lambda: twin(x).pow(2).sum())
loss.backward()
show("twin grad", twin[0].weight.grad)
show("hooks on parameters", sum(len(p._backward_hooks or {}) for p in model.parameters()))
