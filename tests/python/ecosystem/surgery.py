"""Model surgery after the first call: a head replaced, a submodule added, a ModuleList grown, a
module removed. A fresh ModTracker names them under their parent."""

import torch
from _common import final_pass, show
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8)])
        self.head = nn.Linear(8, 2)
        self.dropme = nn.Identity()

    def forward(self, x):
        x = self.body(x)
        for block in self.blocks:
            x = block(x).relu()
        if hasattr(self, "extra"):
            x = self.extra(x)
        return self.head(x)


torch.manual_seed(0)
net = Net()
x = torch.randn(4, 8)
net(x).sum().backward()
net.head = nn.Linear(8, 3)
net.extra = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
net.blocks.append(nn.Linear(8, 8))
net.add_module("spare", nn.Linear(2, 2))
del net.dropme
loss = final_pass(net, lambda: net(x).pow(2).sum())
loss.backward()
show("loss", loss)
show("head grad", net.head.weight.grad)
show("modules", [name for name, _ in net.named_modules()])
