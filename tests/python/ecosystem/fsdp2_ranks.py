"""FSDP2 on two gloo ranks (mp.spawn): fully_shard per block and on the root, training steps
with reshard_after_forward True and False, activation checkpointing in the blocks, and a later
model.to(). Every rank's trace must validate: FSDP2's serve scopes write nothing and must not
count as a nesting level (args.depth)."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _common import final_pass, show
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x)) + x


class FSDPNet(nn.Module):
    def __init__(self, checkpointed):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(16, 2)
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return self.head(x)


def train(rank, reshard, checkpointed):
    torch.manual_seed(0)
    model = FSDPNet(checkpointed)
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(rank))
    for _ in range(2):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    return model, opt, x


def worker(rank, port):
    if rank != 0:
        os.environ.pop("ECOSYSTEM_FQNS", None)  # rank 0 writes the fresh tracker's names
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for reshard, checkpointed in ((True, False), (False, True)):
        model, opt, x = train(rank, reshard, checkpointed)
        weight = model.head.weight.full_tensor()  # a collective: every rank takes part
        if rank == 0:
            show(f"reshard={reshard} checkpointed={checkpointed} weight", weight)
    model.to(torch.float32)
    loss = final_pass(model, lambda: model(x).pow(2).sum())
    loss.backward()
    opt.step()
    if rank == 0:
        show("loss", loss)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port,), nprocs=2, join=True)
    sys.stdout.flush()
