"""FQNTRACE_MEMORY's cost beside torch.profiler's profile_memory (docs/benchmarks.md, section
"memory"). Each mode runs in a fresh process (`cost.py MODE`); the parent (`cost.py`) prints the
results as JSON. Two workloads:

  alloc:   inside one module's forward, `x = a + b` on 64 floats, N times: every op allocates
           its output and frees the previous one (2 allocator reports per op);
  inplace: `a.add_(b)` N times at top level, nothing allocated: what memory-on costs an op that
           allocates nothing (taking and giving back the slot around each outermost range).

Per mode the median over rounds of ns per op; the cost of memory is a mode's difference to the
same tracer without memory, per op and per allocator report.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("baseline", "fqntrace", "fqntrace_memory", "profiler", "profiler_memory")


def _measure(mode, n_ops, rounds):
    import torch
    torch.set_num_threads(1)
    a = torch.ones(64)
    b = torch.ones(64)

    class Adds(torch.nn.Module):
        def forward(self, n):
            x = a
            for _ in range(n):
                x = a + b
            return x

    m = Adds()

    def alloc_round():
        m(n_ops)

    def inplace_round():
        c = a.clone()
        for _ in range(n_ops):
            c.add_(b)

    session = None
    if mode.startswith("fqntrace"):
        import fqntrace
        path = os.path.join(tempfile.mkdtemp(), "cost.json")
        session = fqntrace.profile(path, memory=mode == "fqntrace_memory")
    elif mode.startswith("profiler"):
        import torch.profiler as tp
        session = tp.profile(activities=[tp.ProfilerActivity.CPU],
                             profile_memory=mode == "profiler_memory")
    out = {}
    if session is not None:
        session.__enter__()
    try:
        for name, fn in (("alloc", alloc_round), ("inplace", inplace_round)):
            fn()  # warm-up
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter_ns()
                fn()
                times.append((time.perf_counter_ns() - t0) / n_ops)
            out[name] = statistics.median(times)
    finally:
        if session is not None:
            session.__exit__(None, None, None)
    return out


def main():
    if len(sys.argv) > 1:
        mode = sys.argv[1]
        n_ops = int(sys.argv[2])
        rounds = int(sys.argv[3])
        print(json.dumps(_measure(mode, n_ops, rounds)))
        return
    quick = os.environ.get("FQNTRACE_BENCH_QUICK") == "1"
    n_ops, rounds, repeats = (2000, 5, 1) if quick else (20000, 9, 3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    results = {}
    for _ in range(repeats):  # modes interleaved, so drift on a shared machine hits them all
        for mode in MODES:
            proc = subprocess.run([sys.executable, __file__, mode, str(n_ops), str(rounds)],
                                  env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"cost.py {mode}: {proc.stderr.strip()[-400:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            for k, v in r.items():
                results.setdefault(mode, {}).setdefault(k, []).append(v)
    summary = {mode: {k: min(v) for k, v in r.items()} for mode, r in results.items()}
    summary["reports_per_op"] = {"alloc": 2, "inplace": 0}
    summary["n_ops"] = n_ops
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
