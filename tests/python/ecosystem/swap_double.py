"""torch.__future__ swap conversion: .double() swaps every parameter (swap_tensors), which refuses
tensors with weak references; torch.utils.swap_tensors on a trained parameter likewise."""

import torch
from _common import final_pass, show
from torch import nn

torch.manual_seed(0)
torch.__future__.set_swap_module_params_on_conversion(True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
x = torch.randn(5, 8)
model(x).sum().backward()
model.double()
show("dtype", model[0].weight.dtype)
model.zero_grad()
loss = final_pass(model, lambda: model(x.double()).pow(2).sum())
loss.backward()
show("loss", loss)
show("grad", model[2].weight.grad)
replacement = nn.Parameter(torch.ones_like(model[0].bias))
torch.utils.swap_tensors(model[0].bias, replacement)
show("swapped", model[0].bias)
model.float()
show("dtype after float", model[2].weight.dtype)
