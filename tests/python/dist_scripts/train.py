"""A tiny transformer language model trained on CPU with gloo under torchrun, for
tests/python/test_distributed.py and the measurements in docs/distributed.md.

Nothing here mentions fqntrace: tracing comes from FQNTRACE in the environment alone.

    torchrun --standalone --nproc_per_node=2 train.py --mode ddp|fsdp [--steps N] [--log-loss] [--prefetch]
        [--kill-rank R --kill-step S] [--times] [--dump-buckets FILE]

Each step runs inside record_function("step <i>") (off with --no-step-ranges), so the same step
can be found on every rank. --log-loss all-reduces the loss after each step, as training loops do
to print it. --kill-rank R makes rank R sleep --kill-delay seconds at the start of step
--kill-step and then SIGKILL itself; the other ranks block in that step's first collective until
torchrun tears them down. --times prints each step's wall time.
"""

import argparse
import contextlib
import json
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn

VOCAB = 256


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, dim=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lm_step(model, opt, tokens):
    """One training step on `tokens` (batch, seq): next-token loss, backward, SGD. The tests'
    step, and the DDP benchmarks' (bench/distributed/ddp_ab.py, bench/callgrind_ops.py)."""
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def build(mode, prefetch=False):
    torch.manual_seed(0)
    model = TinyLM()
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        # 0.05 MiB buckets: the model's 0.5 MB of gradients fill eight of them.
        return DistributedDataParallel(model, bucket_cap_mb=0.05)
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    if prefetch:  # explicit prefetch: each all-gather is issued from another block's hook
        blocks = list(model.blocks)
        for block, after in zip(blocks, blocks[1:]):
            block.set_modules_to_forward_prefetch([after])
            after.set_modules_to_backward_prefetch([block])
    return model


def dump_buckets(ddp, path):
    """DDP's buckets after its first iteration, in launch order: the module owning each
    parameter (``blocks.0.mlp.fc1``, names under the DDP wrapper) and the bucket's bytes."""
    owner = {id(p): name.rpartition(".")[0] for name, p in ddp.module.named_parameters()}
    buckets = [
        {"owners": [owner[id(p)] for p in bucket.parameters()], "bytes": bucket.buffer().nbytes}
        for bucket in ddp.reducer._get_zeros_like_grad_buckets()
    ]
    with open(path, "w") as f:
        json.dump(
            {"buckets": buckets, "param_bytes": sum(p.nbytes for p in ddp.module.parameters())}, f
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ddp", choices=["ddp", "fsdp"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--log-loss", action="store_true")
    parser.add_argument("--prefetch", action="store_true", help="fsdp: explicit prefetch")
    parser.add_argument("--no-step-ranges", action="store_true")
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-step", type=int, default=-1)
    parser.add_argument("--kill-delay", type=float, default=1.5)
    parser.add_argument("--times", action="store_true")
    parser.add_argument("--dump-buckets", default="", metavar="FILE")
    parser.add_argument("--destroy", action="store_true", help="destroy_process_group at the end")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = build(args.mode, args.prefetch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + rank)
    for step in range(args.steps):
        if rank == args.kill_rank and step == args.kill_step:
            print(f"rank {rank}: SIGKILL at step {step}", flush=True)
            time.sleep(args.kill_delay)
            os.kill(os.getpid(), signal.SIGKILL)
        tokens = torch.randint(0, VOCAB, (args.batch, args.seq), generator=gen)
        start = time.perf_counter()
        ranges = (
            contextlib.nullcontext()
            if args.no_step_ranges
            else torch.autograd.profiler.record_function(f"step {step}")
        )
        with ranges:
            loss = lm_step(model, opt, tokens)
            if args.log_loss:
                logged = loss.detach().clone()
                dist.all_reduce(logged)
        if args.times:
            print(
                f"rank {rank} step {step} ms {(time.perf_counter() - start) * 1e3:.3f}", flush=True
            )
    if args.dump_buckets and rank == 0:
        dump_buckets(model, args.dump_buckets)
    dist.barrier()
    # No pause before exit: torch's gloo race at interpreter exit (docs/reliability.md) may
    # abort a rank here, traced or not; the tests face it rather than wait it out.
    if args.destroy:
        dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
