"""FQNTRACE_MEMORY's cost beside torch.profiler's profile_memory (docs/benchmarks.md, its table
by hand beside P7; once part "memory" of bench/driver.py, a measurement without a target, kept
here as the command behind that table). Two workloads, timed per op:

  alloc:   inside one module's forward, `x = a + b` on 64 floats, N times: every op allocates
           its output and frees the previous one (2 allocator reports per op);
  inplace: `a.add_(b)` N times at top level, nothing allocated: what memory-on costs an op that
           allocates nothing (fqntrace takes and gives back the slot around each outermost range).

Each tracer runs in its own processes (`memory_cost.py MODE ...`), and inside one process its sessions
alternate between memory off (A) and on (B), one round a block, through the A/B harness
(bench/ab.py), so both variants see the same machine state; the cost of memory is the
difference of the two variants' medians, per process. The
parent (`memory_cost.py`) runs the processes and prints JSON: per tracer the ns per op off and on, and
the median over processes of the difference.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# bench/ab.py, the A/B harness, from here.
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench")
)
import ab  # noqa: E402

TRACERS = ("baseline", "fqntrace", "profiler")
WORKLOADS = ("alloc", "inplace", "alloc_with_stop", "inplace_with_stop")


def _measure(tracer, n_ops, rounds):
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

    tmp = tempfile.mkdtemp()

    def session(memory):
        if tracer == "fqntrace":
            import fqntrace

            return fqntrace.profile(os.path.join(tmp, "cost.json"), memory=memory)
        if tracer == "profiler":
            import torch.profiler as tp

            return tp.profile(activities=[tp.ProfilerActivity.CPU], profile_memory=memory)
        return None

    def block(memory, fn):
        s = session(memory)
        if s is not None:
            s.__enter__()
        try:
            t0 = time.perf_counter_ns()
            fn()
            t1 = time.perf_counter_ns()
        finally:
            if s is not None:
                s.__exit__(None, None, None)
        # With the session's end: torch.profiler processes its events at stop, fqntrace's
        # drain thread while the loop runs (and the rest at stop).
        return [((t1 - t0) / n_ops, (time.perf_counter_ns() - t0) / n_ops)]

    times = {"off": {}, "on": {}}
    for name, fn in (("alloc", alloc_round), ("inplace", inplace_round)):
        fn()  # warm-up
        blocks = ab.run(2 * rounds, lambda memory, fn=fn: block(memory, fn))
        for variant, rounds_ns in zip(("off", "on"), ab.arms(blocks)):
            times[variant][name] = [loop for loop, _ in rounds_ns]
            times[variant][name + "_with_stop"] = [whole for _, whole in rounds_ns]
    return {
        variant: {k: statistics.median(v) for k, v in by.items()} for variant, by in times.items()
    }


def main():
    if len(sys.argv) > 1:
        print(json.dumps(_measure(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
        return
    quick = os.environ.get("FQNTRACE_BENCH_QUICK") == "1"
    n_ops, rounds, processes = (2000, 3, 1) if quick else (20000, 7, 3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    runs = {t: [] for t in TRACERS}
    for _ in range(processes):  # tracers interleaved, so drift on a shared machine hits them all
        for tracer in TRACERS:
            proc = subprocess.run(
                [sys.executable, __file__, tracer, str(n_ops), str(rounds)],
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            if proc.returncode != 0:
                raise SystemExit(f"memory_cost.py {tracer}: {proc.stderr.strip()[-400:]}")
            runs[tracer].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    out = {
        "n_ops": n_ops,
        "rounds": rounds,
        "processes": processes,
        "reports_per_op": {"alloc": 2, "inplace": 0},
    }
    for tracer, rs in runs.items():
        entry = {}
        for variant in ("off", "on"):
            entry[variant] = {w: statistics.median(r[variant][w] for r in rs) for w in WORKLOADS}
        entry["memory_cost"] = {
            w: statistics.median(r["on"][w] - r["off"][w] for r in rs) for w in WORKLOADS
        }
        out[tracer] = entry
    print(json.dumps(out))


if __name__ == "__main__":
    main()
