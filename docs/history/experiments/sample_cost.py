"""What the sampled mode (FQNTRACE_SAMPLE=p, docs/sampling.md) costs and how close its numbers
come to a full trace's, on the demo transformer (fqntrace.demo: TinyTransformer, 2 layers,
dim 128, batch 8, AdamW, one thread).

    .venv/bin/python docs/history/experiments/sample_cost.py [--p 0.01] [--blocks 32] [--steps 20] [--run-steps 200] [--json]
                                          [--null | --floor]

Cost: in one process, blocks of training steps alternate between untraced (A) and traced with
fqntrace.profile(sample=p) (B), through the A/B harness (bench/ab.py); each block's first step
is not timed (a session's start). --null traces
both arms: the A/B's own noise floor. --floor puts, in place of the trace, the callbacks the
sampled mode installs doing nothing (bench/empty_observer's empty_sampled_observer): what torch
charges before fqntrace does anything.

Accuracy: the demo run --run-steps steps three times, each in its own process: a full trace, a
sampled one, and a sampled one without module spans (every node is then written). Reported:
each module's share of the time per step (`summary --json`: self time, every phase) in the full
trace and in the sampled one, for the modules above 2 %, with Global apart and the shares among
the modules alone (Global left out of the whole); the backward nodes whose module differs from
the full trace's (pairs of node name and module, counted); and trace bytes per step.
Run without FQNTRACE set.
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

import fqntrace
import torch

# The bench modules it runs on (bench/ab.py, bench/run_mode.py): a one-off experiment kept here
# with the history, runnable as it is.
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench")
)
import ab  # noqa: E402
from run_mode import HELPER_DIR, demo_step  # noqa: E402


class EmptySampledObserver:
    """The sampled mode's callbacks doing nothing, put in and taken out around a block."""

    def __init__(self, p):
        import ctypes

        os.environ["FQNTRACE_BENCH_SAMPLE"] = repr(p)
        path = os.path.join(HELPER_DIR, "libempty_sampled_observer.so")
        torch.ops.load_library(path)  # installs at load: taken out until a block wants it
        self.lib = ctypes.CDLL(path)
        self.lib.fqntrace_bench_empty_sampled_remove()

    def __enter__(self):
        self.lib.fqntrace_bench_empty_sampled_install()

    def __exit__(self, *exc):
        self.lib.fqntrace_bench_empty_sampled_remove()


def cost(p, blocks, steps, folder, null=False, floor=False):
    step = demo_step()
    empty = EmptySampledObserver(p) if floor else None
    for _ in range(5):
        step()

    def block(traced):
        if not (traced or null):
            step()
            return ab.timed(step, steps)
        path = os.path.join(folder, "block.jsonl")
        with empty if floor else fqntrace.profile(path, sample=p):
            step()  # the session's first step is not timed
            times = ab.timed(step, steps)
        if not floor:
            os.remove(path)
        return times

    untraced, traced = ab.arms(ab.run(blocks, block))
    traced_ms, untraced_ms = statistics.median(traced), statistics.median(untraced)
    return {
        "p": p,
        "steps_per_arm": len(traced),
        "traced_ms": round(traced_ms, 3),
        "untraced_ms": round(untraced_ms, 3),
        "added_pct": round(ab.change_pct(untraced, traced), 2),
        "null": null,
        "floor": floor,
    }


def run_demo(path, steps, **env):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    full_env.update({"FQNTRACE": path, **env})
    subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", str(steps)],
        env=full_env,
        check=True,
        capture_output=True,
    )


def shares(path, without_global=False):
    out = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", path, "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    modules = json.loads(out)["modules"]
    ms = {
        fqn: sum(m[phase]["self_ms"] for phase in ("forward", "backward", "recompute"))
        for fqn, m in modules.items()
    }
    if without_global:
        ms.pop("Global", None)
    total = sum(ms.values())
    return {fqn: 100 * v / total for fqn, v in ms.items()}


def nodes(path):
    count = collections.Counter()
    with open(path) as f:
        for line in f:
            if '"Fwd thread id"' in line and "evaluate_function" not in line:
                e = json.loads(line)
                count[(e["name"], e["args"]["fqn"])] += 1
    return count


def accuracy(p, steps, folder):
    paths = {k: os.path.join(folder, f"{k}.jsonl") for k in ("full", "sampled", "nospans")}
    run_demo(paths["full"], steps)
    run_demo(paths["sampled"], steps, FQNTRACE_SAMPLE=str(p))
    run_demo(paths["nospans"], steps, FQNTRACE_SAMPLE=str(p), FQNTRACE_MODULE_SPANS="0")
    out = {"p": p, "steps": steps}
    for without_global in (False, True):
        full, samp = shares(paths["full"], without_global), shares(paths["sampled"], without_global)
        rows = {
            fqn: (round(full[fqn], 2), round(samp.get(fqn, 0), 2)) for fqn in full if full[fqn] > 2
        }
        worst = max((abs(s - f) for fqn, (f, s) in rows.items() if fqn != "Global"), default=0)
        out["without_global" if without_global else "with_global"] = {
            "rows": rows,
            "worst_module_pp": round(worst, 2),
        }
    full_nodes, sampled_nodes = nodes(paths["full"]), nodes(paths["nospans"])
    named = sum(n for (_, fqn), n in full_nodes.items() if fqn != "Global")
    same = sum(min(n, sampled_nodes[key]) for key, n in full_nodes.items() if key[1] != "Global")
    out["backward_nodes_named_as_full"] = {
        "full_non_global": named,
        "same_in_sampled": same,
        "pct": round(100 * same / named, 3),
    }
    size = {k: os.path.getsize(v) for k, v in paths.items()}
    out["bytes_per_step"] = {
        "full": size["full"] // steps,
        "sampled": size["sampled"] // steps,
        "pct": round(100 * size["sampled"] / size["full"], 2),
    }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p", type=float, default=0.01)
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="steps per A/B block")
    parser.add_argument("--run-steps", type=int, default=200, help="steps of each accuracy run")
    parser.add_argument("--null", action="store_true", help="both A/B arms traced")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="the traced arm runs the sampled mode's callbacks doing nothing",
    )
    parser.add_argument("--only", choices=["cost", "accuracy"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.environ.get("FQNTRACE"):
        sys.exit("run docs/history/experiments/sample_cost.py without FQNTRACE set")
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory(prefix="fqntrace-sample-") as folder:
        if args.only != "accuracy":
            results["cost"] = cost(args.p, args.blocks, args.steps, folder, args.null, args.floor)
        if args.only != "cost":
            results["accuracy"] = accuracy(args.p, args.run_steps, folder)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    if "cost" in results:
        c = results["cost"]
        print(
            f"demo step, in-process A/B ({c['steps_per_arm']} steps an arm{', null' if c['null'] else ''}): "
            f"untraced {c['untraced_ms']} ms, "
            f"{'empty callbacks' if c['floor'] else 'sampled'} p={c['p']} {c['traced_ms']} ms: "
            f"{c['added_pct']:+.2f} %"
        )
    if "accuracy" in results:
        a = results["accuracy"]
        for key in ("with_global", "without_global"):
            print(f"shares ({key.replace('_', ' ')}), full → sampled, modules above 2 %:")
            for fqn, (full, samp) in a[key]["rows"].items():
                print(f"  {fqn:40s} {full:6.2f} → {samp:6.2f}  ({samp - full:+.2f} pp)")
            print(f"  worst module: {a[key]['worst_module_pp']} pp")
        n = a["backward_nodes_named_as_full"]
        print(
            f"backward nodes named as in the full trace: {n['same_in_sampled']} of "
            f"{n['full_non_global']} ({n['pct']} %)"
        )
        b = a["bytes_per_step"]
        print(f"trace bytes per step: full {b['full']}, sampled {b['sampled']} ({b['pct']} %)")


if __name__ == "__main__":
    main()
