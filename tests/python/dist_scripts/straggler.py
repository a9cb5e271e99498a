"""A small model trained with DDP on gloo under torchrun, where one rank does extra work inside
one module: rank --slow-rank runs --extra matmuls in `slow`'s forward, so that module's op time,
and only its own, is larger on that rank. For the cross-rank summary test
(tests/python/test_crossrank.py). Nothing here mentions fqntrace.

    torchrun --standalone --nproc_per_node=2 straggler.py [--slow-rank 1] [--extra 20] [--steps 3]
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn


class Slow(nn.Module):
    def __init__(self, dim, extra):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.extra = extra
        self.square = torch.randn(256, 256)

    def forward(self, x):
        y = self.lin(x)
        acc = self.square
        for _ in range(self.extra):  # a straggler's extra work: ops inside this module
            acc = torch.mm(acc, self.square).tanh()
        return y + acc.sum() * 0


class Net(nn.Module):
    def __init__(self, dim, extra):
        super().__init__()
        self.fast = nn.Linear(dim, dim)
        self.slow = Slow(dim, extra)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        return self.head(self.slow(torch.relu(self.fast(x))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--extra", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        Net(64, args.extra if rank == args.slow_rank else 0)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dist.barrier()
    time.sleep(0.2)  # gloo's workers release their last work before exit (see train.py's end)
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
