"""P7: the drain thread's CPU per op event, from outside: a loop of tiny ops (`torch.add` on
4-element tensors) with FQNTRACE set; process CPU minus the loop thread's CPU over the loop, per
op. The loop runs, then the process idles 0.2 s (the drain thread wakes every 20 ms) so that the
drain's work on the loop's last events is counted too. Every run is a process of its own; the
median over runs is printed (and each run's value).

    .venv/bin/python bench/drain_cpu.py [--ops 400000] [--runs 5] [--suffix .json.gz] [--json OUT]

`--workload train`: a training loop instead (a 4-block MLP of tiny Linear layers, forward,
backward, SGD; `--ops` is then the number of steps): the drain's CPU per written event with
backward in it, where the backward module spans are built (docs/benchmarks.md; `--env
FQNTRACE_MODULE_SPANS=0` for the same without them). `--python`
runs the child with another interpreter (another checkout's .venv: a before/after comparison).

--suffix .json.gz measures the gzip drain (the trace's name decides its format).
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# The child: warm-up, then `n` times OP, then 0.2 s idle for the drain's last events; prints
# whether it traced, the CPU per op of every thread but the loop's, and the loop thread's.
CHILD = r"""
import sys, time, torch
import fqntrace
n = int(sys.argv[1])
torch.set_num_threads(1)
SETUP
for _ in range(WARMUP):
    OP
time.sleep(0.1)
p0, t0 = time.process_time_ns(), time.thread_time_ns()
for _ in range(n):
    OP
t1 = time.thread_time_ns()
time.sleep(0.2)
p1 = time.process_time_ns()
print(fqntrace.tracing(), (p1 - p0 - (t1 - t0)) / n, (t1 - t0) / n)
"""
TRAIN_SETUP = """def block():
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
model = torch.nn.Sequential(*[block() for _ in range(4)], torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4, 8)
def step():
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()"""
CHILDREN = {
    "add": CHILD.replace("SETUP", "a, b = torch.ones(4), torch.ones(4)").replace("WARMUP", "2000"),
    "train": CHILD.replace("SETUP", TRAIN_SETUP).replace("WARMUP", "20"),
}
CHILDREN["add"] = CHILDREN["add"].replace("OP", "torch.add(a, b)")
CHILDREN["train"] = CHILDREN["train"].replace("OP", "step()")


def footer_number(tail, key):
    """A number of the trace's footer (its last 200 bytes), e.g. "events"."""
    return int(tail.split(f'"{key}": ')[1].split(",")[0])


def run_once(ops, trace_dir, env_extra, python=sys.executable, workload="add", suffix=".json"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(env_extra, FQNTRACE=os.path.join(trace_dir, "drain" + suffix), OMP_NUM_THREADS="1")
    cmd = [python, "-c", CHILDREN[workload], str(ops)]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    assert out[0] == "True", "fqntrace did not start"
    size = os.path.getsize(env["FQNTRACE"])
    with (gzip.open if suffix.endswith(".gz") else open)(env["FQNTRACE"], "rb") as f:
        tail = f.read()[-200:].decode(errors="replace")
    dropped = footer_number(tail, "dropped_events") if "dropped_events" in tail else -1
    if workload == "add":
        return float(out[1]), float(out[2]), size / ops, dropped
    # per written event: the tail's count (X events), of which the loop wrote all but the warm-up
    events = footer_number(tail, "events")
    per_step = events / (ops + 20)
    return float(out[1]) / per_step, float(out[2]) / per_step, size / events, dropped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--ops", type=int, default=400_000)
    add("--runs", type=int, default=5)
    add("--suffix", default=".json", help="the trace's name ending: .json or .json.gz")
    add("--json", default="")
    add("--workload", choices=("add", "train"), default="add")
    env = "an environment variable for the child (FQNTRACE_MODULE_SPANS=0)"
    add("--env", action="append", default=[], metavar="NAME=VALUE", help=env)
    add("--python", default=sys.executable, help="the interpreter of the child (default: this one)")
    args = parser.parse_args()
    runs = []  # (drain ns, loop ns, bytes, dropped) per event of each run
    with tempfile.TemporaryDirectory(prefix="fqntrace-drain-cpu-") as d:
        for _ in range(args.runs):
            env = dict(kv.split("=", 1) for kv in args.env)
            runs.append(run_once(args.ops, d, env, args.python, args.workload, args.suffix))
            time.sleep(0.5)
    drain, loop, size, dropped = (list(column) for column in zip(*runs))
    result = {"workload": args.workload, "env": args.env, "python": args.python}
    result.update(suffix=args.suffix, ops=args.ops, runs=args.runs)
    result.update(drain_ns_per_op=statistics.median(drain), drain_ns_per_op_runs=drain)
    result.update(loop_ns_per_op=statistics.median(loop), bytes_per_op=statistics.median(size))
    result["dropped"] = dropped
    print(
        f"[{args.workload}{' ' + ' '.join(args.env) if args.env else ''}] drain CPU per event: {result['drain_ns_per_op']:.0f} ns (runs: "
        f"{', '.join(f'{v:.0f}' for v in drain)}); loop thread {result['loop_ns_per_op']:.0f} ns/event; "
        f"{result['bytes_per_op']:.1f} bytes/event; dropped {dropped}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
