"""DDP step time with and without tracing, in one torchrun job: blocks of steps alternate
untraced (A) and traced through fqntrace.profile (B) by the A/B harness (bench/ab.py), on both
ranks in lockstep, so the machine's slow drifts hit both arms alike. Not a test; P8
(bench/p8_ddp.py's ab_job) runs it.

    torchrun --standalone --nproc_per_node=2 ddp_ab.py [--blocks 16] [--steps 4] [--batch 4] [--seq 32] --out DIR

Each rank writes DIR/ab.<rank>.times.json: {"rank": R, "blocks": [[traced, [ms, ...]], ...]}.
"""

import argparse
import json
import os
import sys
import time

import fqntrace  # noqa: F401  (loaded before the process group and the model, as a job loads it)
import torch
import torch.distributed as dist

# The model of the distributed tests (tests/python/dist_scripts/train.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "dist_scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import ab  # noqa: E402
from train import VOCAB, build, lm_step  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    assert not os.environ.get("FQNTRACE"), "run without FQNTRACE: tracing is switched per block"
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = build("ddp")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + rank)

    def step():
        lm_step(model, opt, torch.randint(0, VOCAB, (args.batch, args.seq), generator=gen))

    path = os.path.join(args.out, f"ab.{rank}.json")
    for _ in range(3):
        step()
    blocks = ab.traced_blocks(step, args.blocks, args.steps, path)
    with open(os.path.join(args.out, f"ab.{rank}.times.json"), "w") as f:
        json.dump({"rank": rank, "blocks": blocks}, f)
    dist.barrier()
    time.sleep(0.2)  # see tests/python/dist_scripts/train.py: let gloo's workers finish first


if __name__ == "__main__":
    main()
