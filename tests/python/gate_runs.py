"""Runs for the diff gate's false-alarm / detection test (test_diff_gate.py), and the script that
measures the rates for docs/report.md:

    .venv/bin/python tests/python/gate_runs.py --pairs 20 [--load] [--steps 25] [--threshold 10]
        [--slower 30] [--measure cpu|wall]
    .venv/bin/python tests/python/gate_runs.py --table [--pairs 20]

--table measures issue 33's table under one busy process per core: 16-step runs, identical and
with Net.hot +30 % (`--threshold 10`), and 40-step runs with Net.hot +10 % (`--threshold 2`),
each pair diffed with `--measure cpu` (the default) and `--measure wall`, and prints it as
markdown for docs/report.md.

A tiny CPU training program of STEPS steps (step 0 is the warm-up `diff` leaves out): per step a few
modules of small matmuls, one of them (`Net.hot`) about 20% of the step; `slow=True` gives it 30%
more matmuls. Runs are made in pairs, interleaved (A B, A B, ...) in one process so that a drift
of the machine's load hits both sides alike, as a CI job comparing against a base built on the
same runner would.

`--load` (and the test) starts one busy process per core for the duration: the gate has to hold
on a machine other jobs load.
"""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

import fqntrace
import torch
from fqntrace.analysis import cli
from torch import nn

STEPS = 25  # step 0 (warm-up) is left out: 24 steps per side (a few ms each)
DIM = 96
COLD_UNITS = (10, 10, 10, 10)  # matmuls per step of the other modules
HOT_UNITS = 10  # Net.hot: 10 of 50 matmuls, 20% of a step
SLOW_HOT_UNITS = 13  # +30% (--slower PCT: HOT_UNITS more by PCT percent)
HOT = "Net.hot"


class Work(nn.Module):
    def __init__(self, units):
        super().__init__()
        self.units = units
        self.w = nn.Parameter(torch.randn(DIM, DIM) / DIM**0.5)

    def forward(self, x):
        for _ in range(self.units):
            x = torch.mm(x, self.w)
        return x


class Net(nn.Module):
    def __init__(self, slow=False):
        super().__init__()
        self.embed = Work(COLD_UNITS[0])
        self.mix = Work(COLD_UNITS[1])
        self.hot = Work(SLOW_HOT_UNITS if slow else HOT_UNITS)
        self.mlp = Work(COLD_UNITS[2])
        self.head = Work(COLD_UNITS[3])

    def forward(self, x):
        return self.head(self.mlp(self.hot(self.mix(self.embed(x)))))


def run(path, slow=False, steps=None):
    """One traced run of `steps` steps (default STEPS), with thread CPU time (diff's `--measure
    cpu` compares it with wall time); returns the trace path."""
    steps = steps or STEPS
    torch.manual_seed(0)
    model = Net(slow=slow)
    x = torch.randn(DIM, DIM)
    model(x).sum().backward()  # untraced warm-up of the allocator and kernels
    with fqntrace.profile(str(path), cpu=True) as written:
        for _ in range(steps):
            model.zero_grad(set_to_none=True)
            model(x).sum().backward()
            fqntrace.step()
    return written


def gate(base, new, threshold=10.0, extra=()):
    """`python -m fqntrace diff BASE NEW --threshold T --json [extra]`, in this process: (exit
    code, the JSON result)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(
            ["diff", str(base), str(new), "--threshold", f"{threshold:g}", "--json", *extra]
        )
    return code, json.loads(out.getvalue())


@contextlib.contextmanager
def busy_cores(n=None):
    """One process spinning per core (the load of other jobs), stopped on exit."""
    n = n or os.cpu_count() or 1
    # Each spins until stopped, or until this process is gone (killed tests leave no spinner).
    spin = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n)]
    try:
        yield n
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def pairs(folder, n_pairs, threshold=10.0, extra=(), variants=None):
    """n_pairs identical pairs and n_pairs pairs with Net.hot slower, interleaved; returns
    {"same": [(code, first row fqn, regressions)], "slow": [...]}. variants: {name: extra} to
    diff every pair several ways; then {name: that dict}."""
    torch.set_num_threads(1)  # one intra-op thread: no wait on a preempted worker
    ways = variants if variants is not None else {None: extra}
    out = {name: {"same": [], "slow": []} for name in ways}
    for i in range(n_pairs):
        a = run(os.path.join(folder, f"a{i}.json"))
        b = run(os.path.join(folder, f"b{i}.json"))
        c = run(os.path.join(folder, f"c{i}.json"))
        s = run(os.path.join(folder, f"s{i}.json"), slow=True)
        for name, way in ways.items():
            for kind, (base, new) in (("same", (a, b)), ("slow", (c, s))):
                code, result = gate(base, new, threshold, way)
                out[name][kind].append((code, result["rows"][0]["fqn"], result["regressions"]))
    return out if variants is not None else out[None]


def counts(result):
    """(identical pairs that passed, slow pairs that failed naming Net.hot, slow pairs with
    Net.hot first)."""
    passed = sum(code == 0 for code, _, _ in result["same"])
    named = sum(code == 3 and HOT in regressions for code, _, regressions in result["slow"])
    first = sum(first == HOT for _, first, _ in result["slow"])
    return passed, named, first


def table(n_pairs, folder):
    """Issue 33's table, CPU and wall time on the same runs, as markdown lines."""
    measures = {"cpu": ("--measure", "cpu"), "wall": ("--measure", "wall")}
    cases = []
    with busy_cores() as n:
        for steps, slower, threshold in ((16, 30, 10.0), (40, 10, 2.0)):
            globals()["STEPS"] = steps
            globals()["SLOW_HOT_UNITS"] = HOT_UNITS + HOT_UNITS * slower // 100
            sub = os.path.join(folder, f"s{steps}")
            os.makedirs(sub, exist_ok=True)
            cases.append(
                (steps, slower, threshold, pairs(sub, n_pairs, threshold, variants=measures))
            )
    lines = [
        f"| case ({n} busy processes, {n_pairs} pairs) | `--threshold` | measure | identical: "
        "gate passed | slower: gate failed naming it | slower: it is the first row |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for steps, slower, threshold, by_measure in cases:
        for name, result in by_measure.items():
            passed, named, first = counts(result)
            lines.append(
                f"| {steps} steps, `{HOT}` +{slower} % work | {threshold:g} | {name} | "
                f"{passed} | {named} | {first} |"
            )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--load", action="store_true", help="one busy process per core")
    parser.add_argument("--threshold", type=float, default=10.0)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--absolute", action="store_true", help="diff --absolute (plain ms)")
    parser.add_argument(
        "--slower",
        type=int,
        default=30,
        help="percent more matmuls in Net.hot on the slow side (multiple of 10)",
    )
    parser.add_argument("--measure", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--folder", default=None)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the outcomes as JSON (test_diff_gate.py reads them)",
    )
    parser.add_argument(
        "--table", action="store_true", help="issue 33's table, both measures (see above)"
    )
    args = parser.parse_args()
    if args.table:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fqntrace-gate-") as folder:
            print("\n".join(table(args.pairs, args.folder or folder)))
        return
    globals()["STEPS"] = args.steps
    globals()["SLOW_HOT_UNITS"] = HOT_UNITS + HOT_UNITS * args.slower // 100
    import tempfile

    folder = args.folder or tempfile.mkdtemp(prefix="fqntrace-gate-")
    with busy_cores() if args.load else contextlib.nullcontext():
        result = pairs(
            folder,
            args.pairs,
            args.threshold,
            ("--absolute",) * args.absolute + ("--measure", args.measure),
        )
    if args.json:
        print(json.dumps(result))
        return
    false_alarms = sum(code != 0 for code, _, _ in result["same"])
    detected = sum(code == 3 and first == HOT for code, first, _ in result["slow"])
    failed = sum(code == 3 for code, _, _ in result["slow"])
    print(
        f"load: {'one busy process per core' if args.load else 'none added'}; "
        f"{args.pairs} pairs each, {STEPS} steps a run, threshold {args.threshold:g}%, "
        f"--measure {args.measure}" + (", --absolute" if args.absolute else "")
    )
    print(
        f"identical pairs: {false_alarms}/{args.pairs} false alarms "
        f"({[r for _, _, r in result['same'] if r]})"
    )
    print(
        f"{HOT} +{args.slower}%: {failed}/{args.pairs} failed the gate, {detected}/{args.pairs} with "
        f"{HOT} ranked first"
    )


if __name__ == "__main__":
    main()
