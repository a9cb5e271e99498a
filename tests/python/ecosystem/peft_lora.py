"""PEFT LoRA injected after a warm-up forward (get_peft_model replaces Linear layers)."""

import torch
from _common import final_pass, show
from peft import LoraConfig, get_peft_model
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(8, 8)
        self.v_proj = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.q_proj(x).relu() + self.v_proj(x))


torch.manual_seed(0)
model = Tiny()
x = torch.randn(4, 8)
model(x).sum().backward()
peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
opt = torch.optim.SGD([p for p in peft_model.parameters() if p.requires_grad], lr=0.1)
loss = final_pass(peft_model, lambda: peft_model(x).pow(2).sum())
loss.backward()
opt.step()
show("loss", loss)
show("lora grad", model.q_proj.lora_A["default"].weight.grad)
peft_model.print_trainable_parameters()
