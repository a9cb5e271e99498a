"""What FQNTRACE_DEVICE's Kineto session adds to a full trace, on this machine (no GPU: Kineto's
CPU activity, FQNTRACE_DEVICE=cpu, which is what the join needs on a GPU too; a GPU adds CUPTI's
activity records). In one process, blocks of steps alternate between a fqntrace session without
device collection (arm A) and one with it (B), through the A/B harness (bench/ab.py). Per
workload: the median step time in each arm, and what a recording's end costs (synchronize,
Kineto's stop, its trace saved and joined, the device events handed over): the session's stop in
B less A's, per recording and per op Kineto recorded. Workloads: P1's MLP step and P2's
transformer training step (bench/run_mode.py). A block has fewer steps than the collector's
roll-over (ROLL_STEPS, counting the block's untimed first step), so each B block is one
recording.

    .venv/bin/python docs/history/experiments/device_cost.py [--blocks 32] [--steps 8]

Run without FQNTRACE set.
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

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench")
)
import ab  # noqa: E402
import run_mode  # noqa: E402


def measure(name, step, blocks, steps, folder):
    for _ in range(3):
        step()
    stops, ops = {False: [], True: []}, []

    def block(device):
        os.environ["FQNTRACE_DEVICE"] = "cpu" if device else "0"
        path = os.path.join(folder, f"{name}.json")
        times = []
        with fqntrace.profile(path):
            step()  # the session's first step is not timed
            for _ in range(steps):
                t0 = time.perf_counter_ns()
                step()
                times.append((time.perf_counter_ns() - t0) / 1e3)
            stop_started = time.perf_counter_ns()
        stops[device].append((time.perf_counter_ns() - stop_started) / 1e6)
        if device:
            with open(path) as f:
                ops.append(json.load(f)["fqntrace"]["device"]["collected"]["ops"])
        os.remove(path)
        return times

    off, on = ab.arms(ab.run(blocks, block))
    on_us, off_us = statistics.median(on), statistics.median(off)
    stop_ms = statistics.median(stops[True]) - statistics.median(stops[False])
    per_recording_ops = statistics.median(ops)
    return {
        "workload": name,
        "steps_per_arm": len(on),
        "step_on_us": round(on_us, 1),
        "step_off_us": round(off_us, 1),
        "added_pct": round(100 * (on_us - off_us) / off_us, 1),
        "ops_per_recording": per_recording_ops,
        "recording_end_ms": round(stop_ms, 1),
        "recording_end_us_per_op": round(1e3 * stop_ms / per_recording_ops, 2),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8, help="MLP steps per block (< 9)")
    args = parser.parse_args()
    if os.environ.get("FQNTRACE"):
        sys.exit("run device_cost.py without FQNTRACE set")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="fqntrace-device-cost-") as folder:
        results = [
            measure("mlp", run_mode.mlp_step(), args.blocks, args.steps, folder),
            measure(
                "transformer",
                run_mode.transformer_step(8),
                args.blocks,
                max(2, args.steps // 4),
                folder,
            ),
        ]
    print(
        "| workload | step µs, device collection on → off | added | Kineto CPU ops per "
        "recording | a recording's end (stop, save, join, write) | per op |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['workload']} | {r['step_on_us']:.1f} → {r['step_off_us']:.1f} | "
            f"{r['added_pct']:+.1f} % | {int(r['ops_per_recording']):,} | "
            f"{r['recording_end_ms']:.1f} ms | {r['recording_end_us_per_op']:.2f} µs |"
        )


if __name__ == "__main__":
    main()
