"""Does a change to the analysis engine keep every verb's output byte for byte? Makes four traces
(the demo, a sampled one at p = 0.3, a compiled model's as JSON Lines, and two gloo ranks of a
DDP job), then runs `summary --json`, `summary`, `validate` and `diff` on each with two builds of
the fqntrace package and compares what they print.

    python docs/history/experiments/engine_same_output.py OLD_PARENT NEW_PARENT [--keep DIR]

OLD_PARENT, NEW_PARENT: folders holding a `fqntrace` package each (a copy of site-packages'
fqntrace, say), put first on PYTHONPATH for their runs. The traces are made once, traced by the
installed fqntrace. Prints one line per (trace, verb) and exits 1 when any output differs."""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

COMPILED = r"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
fast = torch.compile(model)
for _ in range(4):
    fast(torch.randn(16, 32)).sum().backward()
"""

DDP = r"""
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                    torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(4):
    opt.zero_grad()
    model(torch.randn(8, 32)).pow(2).mean().backward()
    opt.step()
dist.barrier()
dist.destroy_process_group()
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FQNTRACE", "PYTHONPATH"))}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def make_traces(out):
    """{label: [trace paths]}: the files the verbs read."""
    py = sys.executable
    run = lambda cmd, **env: subprocess.run(cmd, env=clean_env(**env), cwd=out, check=True)  # noqa: E731
    demo = os.path.join(out, "demo.json")
    run([py, "-m", "fqntrace.demo", "--steps", "6"], FQNTRACE=demo)
    sampled = os.path.join(out, "sampled.json")
    run([py, "-m", "fqntrace.demo", "--steps", "6"], FQNTRACE=sampled, FQNTRACE_SAMPLE="0.3")
    compiled = os.path.join(out, "compiled.jsonl")
    run([py, "-c", COMPILED], FQNTRACE=compiled)
    script = os.path.join(out, "ddp.py")
    with open(script, "w") as f:
        f.write(DDP)
    torchrun = os.path.join(os.path.dirname(py), "torchrun")
    run(
        [torchrun, "--standalone", "--nproc_per_node=2", script],
        FQNTRACE=os.path.join(out, "ddp.json"),
    )
    ranks = sorted(p for p in glob.glob(os.path.join(out, "ddp*.json")) if "summary" not in p)
    return {"demo": [demo], "sampled": [sampled], "compiled": [compiled], "2 ranks": ranks}


def outputs(parent, traces):
    """{(label, verb): (exit code, stdout, stderr)} of the verbs with `parent`'s package."""
    env = clean_env(PYTHONPATH=parent)
    got = {}
    for label, paths in traces.items():
        verbs = {
            "summary --json": ["summary", "--json", paths[0]],
            "summary": ["summary", paths[0]],
            "validate": ["validate", paths[0]],
            "diff": ["diff", paths[0], paths[-1]],
        }
        if len(paths) > 1:
            verbs["summary (all ranks)"] = ["summary", *paths]
        for verb, argv in verbs.items():
            done = subprocess.run(
                [sys.executable, "-m", "fqntrace", *argv], env=env, capture_output=True
            )
            got[label, verb] = (done.returncode, done.stdout, done.stderr)
    return got


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--keep", help="make the traces here and keep them")
    args = parser.parse_args()
    out = args.keep or tempfile.mkdtemp(prefix="engine_same_output.")
    os.makedirs(out, exist_ok=True)
    traces = make_traces(out)
    old, new = outputs(args.old, traces), outputs(args.new, traces)
    differ = 0
    for key in old:
        same = old[key] == new[key]
        differ += not same
        rc, stdout, _ = new[key]
        print(
            f"{key[0]:9} {key[1]:20} exit {rc}  {len(stdout):7} bytes  {'same' if same else 'DIFFERENT'}"
        )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
