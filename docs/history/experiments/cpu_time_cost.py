"""What the thread CPU readings (FQNTRACE_CPU, plugin/thread_cpu.h) cost a traced step, in one
process: blocks of steps alternate between a session with the readings off (FQNTRACE_CPU=0,
arm A) and one with them on (B), through the A/B harness (bench/ab.py). Workloads: P1's MLP
step (4 Linear, 3 ReLU, batch 8: forward, backward, zero_grad) and P2's transformer training
step (fqntrace.demo.TinyTransformer, AdamW). Once bench/cpu_time_cost.py, run by
scripts/bench.sh; here since the readings are opt-in, as the command behind the rows `cpu` and
`cpu-mlp` of bench/measured_by_hand.toml (docs/benchmarks.md's opening table).

    .venv/bin/python docs/history/experiments/cpu_time_cost.py [--blocks 64] [--steps 50] \
        [--null] [--json]

Prints, per workload: the median step time (wall and the loop thread's CPU) with readings on
and off, the difference, and the ranges per step that carry CPU time (module calls and
outermost backward ops, counted in a trace of one step; each costs one or two readings: a
reading at a range's start is saved when the one before can serve, plugin/observer.cpp). Short
blocks, many of them: the machine's drift between blocks is the noise of this A/B (a
transformer block of 20 steps moved by 2-3 % from block to block here). --null runs both arms
with the readings on: the A/B's own noise floor. Run without FQNTRACE set.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import fqntrace
import torch

# bench/ab.py (the A/B harness) and bench/run_mode.py (P1's and P2's steps), from here.
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench")
)
import ab  # noqa: E402
import run_mode  # noqa: E402


def measured_ranges(step, folder):
    """(module calls, outermost backward ops) of one traced step: the ranges with CPU time."""
    path = os.path.join(folder, "count.json")
    os.environ["FQNTRACE_CPU"] = "1"
    with fqntrace.profile(path):
        step()
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    events = [e for e in events if "self_cpu_ns" in (e.get("args") or {})]
    modules = sum(1 for e in events if e.get("cat") == "user_annotation")
    return modules, len(events) - modules


def measure(name, step, blocks, steps, folder, null=False):
    for _ in range(3):
        step()  # warm-up: allocator, kernels, the module names
    modules, backward = measured_ranges(step, folder)

    def block(on):
        os.environ["FQNTRACE_CPU"] = "1" if on or null else "0"
        path = os.path.join(folder, f"{name}.json")
        times = []  # (wall, loop-thread CPU) ns of each step
        with fqntrace.profile(path):
            step()  # the session's first step is not timed
            for _ in range(steps):
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                step()
                times.append((time.perf_counter_ns() - w0, time.thread_time_ns() - c0))
        os.remove(path)
        return times

    off, on = ab.arms(ab.run(blocks, block))
    out = {"workload": name, "module_calls": modules, "backward_ops": backward}
    out["steps_per_arm"] = len(on)
    for what, column in (("wall", 0), ("cpu", 1)):
        on_us = statistics.median(t[column] for t in on) / 1e3
        off_us = statistics.median(t[column] for t in off) / 1e3
        out[what] = {
            "on_us": round(on_us, 2),
            "off_us": round(off_us, 2),
            "added_us": round(on_us - off_us, 2),
            "added_pct": round(100 * (on_us - off_us) / off_us, 2),
        }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=64)
    steps = "MLP steps per block (the transformer runs a tenth as many, at least 2)"
    parser.add_argument("--steps", type=int, default=50, help=steps)
    parser.add_argument("--null", action="store_true", help="both arms with the readings on")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.environ.get("FQNTRACE"):
        sys.exit("run cpu_time_cost.py without FQNTRACE set")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="fqntrace-cpu-cost-") as folder:
        # P1's MLP step, and P2's transformer step at its default batch (fewer steps a block).
        workloads = [("mlp", run_mode.mlp_step, args.steps)]
        workloads += [
            ("transformer", lambda: run_mode.transformer_step(8), max(2, args.steps // 10))
        ]
        results = [
            measure(name, make(), args.blocks, steps, folder, args.null)
            for name, make, steps in workloads
        ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        "| workload | ranges with CPU time per step (module calls, backward ops) | wall µs/step "
        "on → off | added | loop-thread CPU µs/step on → off | added |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        w, c = r["wall"], r["cpu"]
        print(
            f"| {r['workload']} | {r['module_calls'] + r['backward_ops']} ({r['module_calls']}, "
            f"{r['backward_ops']}) | {w['on_us']:.1f} → {w['off_us']:.1f} | "
            f"{w['added_us']:+.1f} µs ({w['added_pct']:+.2f} %) | {c['on_us']:.1f} → "
            f"{c['off_us']:.1f} | {c['added_us']:+.1f} µs ({c['added_pct']:+.2f} %) |"
        )


if __name__ == "__main__":
    main()
