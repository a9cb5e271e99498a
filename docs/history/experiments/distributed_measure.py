"""Measurements for docs/distributed.md: run from the repository root with

    .venv/bin/python docs/history/experiments/distributed_measure.py [--steps 60] [--pairs 1] [--out DIR]
        [--train-args '--batch 16 --seq 128'] [--skip-overhead] [--ab-blocks 16] [--skip-comm]
        [--json AB.json]

The workload is the distributed tests' training script, tests/python/dist_scripts/train.py, so the
numbers are about the model the tests check.

1. Overhead: train.py --mode ddp under torchrun on 2 CPU ranks, without and with FQNTRACE,
   alternating (--pairs times); each run prints its step times; the median over the steps after
   the first five, per rank, then the slower rank (DDP steps are synchronous).
2. The in-process A/B (--ab-blocks; bench/p8_ddp.py's ab_job, P8's job), as a table.
3. Communication per module: train.py --mode fsdp with FQNTRACE_FORMATS=summary; rank 0's
   <stem>.summary.json as a table (collectives, bytes, comm_ms per module and phase).
Prints Markdown. A one-off kept with the history (P8 runs the A/B itself), on bench/'s modules.
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "python", "dist_scripts", "train.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from p8_ddp import ab_job  # noqa: E402
from p8_ddp import torchrun as run_script  # noqa: E402


def torchrun(args, fqntrace=None, formats=None):
    """train.py under torchrun on 2 ranks, with FQNTRACE (and FQNTRACE_FORMATS) when given."""
    env = {k: v for k, v in (("FQNTRACE", fqntrace), ("FQNTRACE_FORMATS", formats)) if v}
    try:
        return run_script(SCRIPT, args, env)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None


def step_medians(output, skip):
    times = {}
    for m in re.finditer(r"rank (\d+) step (\d+) ms ([\d.]+)", output):
        rank, step, ms = int(m.group(1)), int(m.group(2)), float(m.group(3))
        if step >= skip:
            times.setdefault(rank, []).append(ms)
    return {rank: statistics.median(v) for rank, v in times.items()}


def overhead(steps, pairs, out, extra):
    args = ["--mode", "ddp", "--steps", str(steps), "--times", *extra]
    rows = []
    for i in range(pairs):
        off = step_medians(torchrun(args), skip=5)
        on = step_medians(
            torchrun(args, fqntrace=os.path.join(out, f"ovh{i}.{{rank}}.json")), skip=5
        )
        rows.append((max(off.values()), max(on.values()), off, on))
    print(
        f"### DDP step ({' '.join(extra) or 'train.py defaults'}), {steps} steps, "
        f"median of steps 5..{steps - 1}\n"
    )
    print("| run | without FQNTRACE (ms) | with FQNTRACE (ms) | overhead |")
    print("|---|---|---|---|")
    for i, (a, b, off, on) in enumerate(rows):
        detail = ", ".join(f"r{r} {off[r]:.2f}/{on[r]:.2f}" for r in sorted(off))
        print(f"| {i} ({detail}) | {a:.2f} | {b:.2f} | {100 * (b - a) / a:+.1f}% |")
    trace = json.load(open(os.path.join(out, "ovh0.0.json")))
    n = trace["fqntrace"]["events"]
    print(
        f"\nrank 0's trace of run 0: {n} events over {steps} steps (~{n // steps} per step), "
        f"{os.path.getsize(os.path.join(out, 'ovh0.0.json')) / 1e6:.1f} MB\n"
    )


def in_process_ab(blocks, steps, out, extra):
    """bench/distributed/ddp_ab.py's job (P8's) as a table."""
    result = ab_job(blocks, steps, out, extra)
    off, on, groups = result["untraced_ms"], result["traced_ms"], result["group_overheads"]
    print(
        f"### DDP step, in-process A/B ({' '.join(extra) or 'train.py defaults'}), {blocks} blocks "
        f"of {steps} steps, slower rank per step\n"
    )
    print("| arm | ms/step (median) | overhead | per A B B A group: median (min … max) |")
    print("|---|---|---|---|")
    print(f"| untraced | {off:.2f} | — | — |")
    print(
        f"| traced (fqntrace.profile) | {on:.2f} | {100 * (on / off - 1):+.1f}% | "
        f"{100 * statistics.median(groups):+.1f}% ({100 * min(groups):+.1f} … {100 * max(groups):+.1f}%) |\n"
    )
    return result


def comm_table(steps, out):
    torchrun(
        ["--mode", "fsdp", "--steps", str(steps)],
        fqntrace=os.path.join(out, "fsdp.{rank}.json"),
        formats="summary",
    )
    summary = json.load(open(os.path.join(out, "fsdp.0.summary.json")))
    print(f"### FSDP2, rank 0, {steps} steps (from fsdp.0.summary.json)\n")
    print("| module | phase | collectives | comm_bytes | comm_ms |")
    print("|---|---|---|---|---|")
    for fqn, row in summary["modules"].items():
        for phase in ("forward", "backward", "recompute"):
            cell = row.get(phase) or {}
            if cell.get("collectives") or cell.get("comm_ms"):
                print(
                    f"| {fqn} | {phase} | {cell['collectives']} | {cell['comm_bytes']} | "
                    f"{cell['comm_ms']:.2f} |"
                )
    print()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--fsdp-steps", type=int, default=10)
    parser.add_argument("--out", default="")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-comm", action="store_true", help="no FSDP communication table")
    parser.add_argument("--json", default="", help="write the in-process A/B's numbers here")
    parser.add_argument(
        "--ab-blocks",
        type=int,
        default=0,
        help="also run ddp_ab.py: this many blocks (a multiple of 4) of 4 steps",
    )
    parser.add_argument(
        "--train-args",
        default="",
        help="extra train.py arguments for the overhead runs, e.g. '--batch 16 --seq 128'",
    )
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="fqntrace-dist-")
    os.makedirs(out, exist_ok=True)
    if not args.skip_overhead:
        overhead(args.steps, args.pairs, out, args.train_args.split())
    if args.ab_blocks:
        ab = in_process_ab(args.ab_blocks, 4, out, args.train_args.split())
        if args.json:
            with open(args.json, "w") as f:
                json.dump(ab, f, indent=1)
    if not args.skip_comm:
        comm_table(args.fsdp_steps, out)
    print(f"(files in {out})")


if __name__ == "__main__":
    main()
