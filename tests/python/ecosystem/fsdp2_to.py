"""FSDP2 (fully_shard) on one gloo rank: a training step, then model.to(), which swaps the
sharded parameters (swap_tensors)."""

import os
import socket

import torch
import torch.distributed as dist
from _common import final_pass, show
from torch import nn
from torch.distributed.fsdp import fully_shard

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group("gloo", rank=0, world_size=1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
model(x).sum().backward()
opt.step()
opt.zero_grad()
model.to(torch.float32)
model.to("cpu")
loss = final_pass(model, lambda: model(x).pow(2).sum())
loss.backward()
opt.step()
show("loss", loss)
show("dtype", model[0].weight.dtype)
dist.destroy_process_group()
