"""Measurements for docs/distributed.md: run from the repository root with

    .venv/bin/python bench/distributed/measure.py [--steps 60] [--pairs 1] [--out DIR]
        [--train-args '--batch 16 --seq 128'] [--skip-overhead] [--ab-blocks 16] [--skip-comm]
        [--json AB.json]

The workload is the distributed tests' training script, tests/python/dist_scripts/train.py, so the
numbers are about the model the tests check.

1. Overhead: train.py --mode ddp under torchrun on 2 CPU ranks, without and with FQNTRACE,
   alternating (--pairs times); each run prints its step times; the median over the steps after
   the first five, per rank, then the slower rank (DDP steps are synchronous).
2. Communication per module: train.py --mode fsdp with FQNTRACE_FORMATS=summary; rank 0's
   <stem>.summary.json as a table (collectives, bytes, comm_ms per module and phase).
Prints Markdown.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tests", "python", "dist_scripts", "train.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
sys.path.insert(0, os.path.dirname(HERE))
import ab  # noqa: E402  (bench/ab.py)


def torchrun(args, fqntrace=None, formats=None, script=SCRIPT):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env["OMP_NUM_THREADS"] = "1"
    if fqntrace:
        env["FQNTRACE"] = fqntrace
    if formats:
        env["FQNTRACE_FORMATS"] = formats
    proc = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node=2", script, *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:])
    return proc.stdout


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
        on = step_medians(torchrun(args, fqntrace=os.path.join(out, f"ovh{i}.{{rank}}.json")),
                          skip=5)
        rows.append((max(off.values()), max(on.values()), off, on))
    print(f"### DDP step ({' '.join(extra) or 'train.py defaults'}), {steps} steps, "
          f"median of steps 5..{steps - 1}\n")
    print("| run | without FQNTRACE (ms) | with FQNTRACE (ms) | overhead |")
    print("|---|---|---|---|")
    for i, (a, b, off, on) in enumerate(rows):
        detail = ", ".join(f"r{r} {off[r]:.2f}/{on[r]:.2f}" for r in sorted(off))
        print(f"| {i} ({detail}) | {a:.2f} | {b:.2f} | {100 * (b - a) / a:+.1f}% |")
    trace = json.load(open(os.path.join(out, "ovh0.0.json")))
    n = trace["fqntrace"]["events"]
    print(f"\nrank 0's trace of run 0: {n} events over {steps} steps (~{n // steps} per step), "
          f"{os.path.getsize(os.path.join(out, 'ovh0.0.json')) / 1e6:.1f} MB\n")


def in_process_ab(blocks, steps, out, extra):
    """ddp_ab.py: traced and untraced blocks alternate inside one job; per step the slower rank."""
    torchrun(["--blocks", str(blocks), "--steps", str(steps), "--out", out, *extra],
             script=os.path.join(HERE, "ddp_ab.py"))
    ranks = [json.load(open(os.path.join(out, f"ab.{r}.times.json"))) for r in (0, 1)]
    # Per block: (traced, the slower rank's time for each step).
    blocks_ms = [(block[0], [max(t) for t in zip(*(r["blocks"][b][1] for r in ranks))])
                 for b, block in enumerate(ranks[0]["blocks"])]
    untraced, traced = ab.arms(blocks_ms)
    groups = [pct / 100 for pct in ab.group_changes(blocks_ms, statistics.median)]
    off, on = statistics.median(untraced), statistics.median(traced)
    print(f"### DDP step, in-process A/B ({' '.join(extra) or 'train.py defaults'}), {blocks} blocks "
          f"of {steps} steps, slower rank per step\n")
    print("| arm | ms/step (median) | overhead | per A B B A group: median (min … max) |")
    print("|---|---|---|---|")
    print(f"| untraced | {off:.2f} | — | — |")
    print(f"| traced (fqntrace.profile) | {on:.2f} | {100 * (on / off - 1):+.1f}% | "
          f"{100 * statistics.median(groups):+.1f}% ({100 * min(groups):+.1f} … {100 * max(groups):+.1f}%) |\n")
    return {"blocks": blocks, "steps_per_block": steps, "train_args": extra, "untraced_ms": off,
            "traced_ms": on, "overhead": on / off - 1, "group_overheads": groups,
            "group_median": statistics.median(groups)}


def comm_table(steps, out):
    torchrun(["--mode", "fsdp", "--steps", str(steps)], fqntrace=os.path.join(out, "fsdp.{rank}.json"),
             formats="summary")
    summary = json.load(open(os.path.join(out, "fsdp.0.summary.json")))
    print(f"### FSDP2, rank 0, {steps} steps (from fsdp.0.summary.json)\n")
    print("| module | phase | collectives | comm_bytes | comm_ms |")
    print("|---|---|---|---|---|")
    for fqn, row in summary["modules"].items():
        for phase in ("forward", "backward", "recompute"):
            cell = row.get(phase) or {}
            if cell.get("collectives") or cell.get("comm_ms"):
                print(f"| {fqn} | {phase} | {cell['collectives']} | {cell['comm_bytes']} | "
                      f"{cell['comm_ms']:.2f} |")
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
    parser.add_argument("--ab-blocks", type=int, default=0,
                        help="also run ddp_ab.py: this many blocks (a multiple of 4) of 4 steps")
    parser.add_argument("--train-args", default="",
                        help="extra train.py arguments for the overhead runs, e.g. '--batch 16 --seq 128'")
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
