"""accelerate: Accelerator.prepare and two training steps on CPU."""

import torch
from _common import final_pass, show
from accelerate import Accelerator
from torch import nn

torch.manual_seed(0)
accelerator = Accelerator(cpu=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, opt = accelerator.prepare(model, opt)
x, y = torch.randn(8, 8), torch.randn(8, 1)
for _ in range(2):
    loss = nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
loss = final_pass(model, lambda: nn.functional.mse_loss(model(x), y))
accelerator.backward(loss)
show("loss", loss)
