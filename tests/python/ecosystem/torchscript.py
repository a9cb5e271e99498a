"""TorchScript: a scripted model runs forward and backward. Its submodules run inside
TorchScript, never through nn.Module.__call__, yet their parameters' gradients are accumulated:
the trace's module table names them."""

import torch
from _common import final_pass, show
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
x = torch.randn(4, 8)
scripted = torch.jit.script(Net())
scripted(x).sum().backward()
show("grad", scripted.fc2.weight.grad)
scripted.zero_grad()
loss = final_pass(scripted, lambda: scripted(x).pow(2).sum())
loss.backward()
show("loss", loss)
show("grad", scripted.fc1.weight.grad)
