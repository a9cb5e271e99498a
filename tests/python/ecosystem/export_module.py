"""torch.export: the exported program's module runs forward and backward. Its submodules keep
their parameters but are never called (the graph is inlined), so their gradient accumulation
belongs to modules that have no span: the trace's module table names them."""

import torch
from _common import final_pass, show
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.body(x))


torch.manual_seed(0)
x = torch.randn(4, 8)
exported = torch.export.export(Net(), (x,))
module = exported.module()
module(x).sum().backward()
show("grad", module.head.weight.grad)
module.zero_grad()
loss = final_pass(module, lambda: module(x).pow(2).sum())
loss.backward()
show("loss", loss)
show("grad", module.get_parameter("body.0.weight").grad)
