"""A small training loop for tests/python/test_on_demand.py and
docs/history/experiments/on_demand_cost.py: an MLP of named blocks trained with SGD, one
process or, under torchrun, DDP over gloo. Nothing here mentions fqntrace unless asked
(--program-capture).

    loop.py [--steps N] [--until-file F] [--sleep S] [--slow-from A --slow-steps K]
            [--program-capture STEP] [--width W]

--until-file F: run until F exists (every rank agrees through an all-reduce each step), at most
--steps steps. --slow-from A: the module `slowpoke` does extra matrix products in steps A..A+K-1
(an injected slow episode). Prints `rank R done N` (N: steps run) and the loss of the last step.
"""

import argparse
import os
import time

import torch
from torch import nn


class Slowpoke(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.register_buffer("big", torch.randn(384, 384) / 20)
        self.extra = 0  # 384 x 384 matrix products to add (~3 ms each here): the injected slowness

    def forward(self, x):
        y = self.lin(x)
        if self.extra:
            z = self.big
            for _ in range(self.extra):
                z = torch.tanh(z @ self.big)
            y = y + z.mean() * 1e-3
        return y


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(3)]
        )
        self.slowpoke = Slowpoke(width)
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.slowpoke(self.blocks(self.inp(x))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--until-file")
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--slow-from", type=int, default=-1)
    ap.add_argument("--slow-steps", type=int, default=20)
    ap.add_argument("--slow-extra", type=int, default=10)
    ap.add_argument("--program-capture", type=int, default=-1)
    ap.add_argument("--width", type=int, default=32)
    args = ap.parse_args()

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Model(args.width)
    train = model
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        train = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(train.parameters(), lr=1e-3)
    x = torch.randn(16, args.width)
    done = 0
    loss = None
    for step in range(args.steps):
        if args.until_file is not None:
            stop = torch.tensor([1.0 if os.path.exists(args.until_file) else 0.0])
            if distributed:
                dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item() > 0:
                break
        if step == args.program_capture:
            import fqntrace

            print("program capture", fqntrace.capture(steps=3), flush=True)
        slow = args.slow_from <= step < args.slow_from + args.slow_steps
        model.slowpoke.extra = args.slow_extra if slow else 0
        loss = train(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        done += 1
        if args.sleep:
            time.sleep(args.sleep)
    print(f"rank {rank} done {done} loss {float(loss.detach()):.6f}", flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
