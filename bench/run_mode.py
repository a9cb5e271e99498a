"""One benchmark measurement in one mode, in this process; prints one JSON object on stdout.

    .venv/bin/python bench/run_mode.py --mode fqntrace --bench ops --samples 9 --ops 20000

The mode (bench/modes.py lists them; `--help` describes them) is set up here, except FQNTRACE
itself: the driver (bench/driver.py) sets it in this process's environment for the traced modes,
so tracing starts the way it does for a user (the start-up hook, when torch is imported).

Benches: ops (torch.add on 4-element tensors, ns/op), mlp (4 Linear 16 wide, batch 8,
forward+backward, us/step), transformer_ab (P2's transformer training step, ms/step, traced and
untraced blocks alternating in this one process through fqntrace.profile; mode baseline),
rss (RSS while looping tiny ops), trackers (P3: fqntrace's and torch's ModTracker and
ModuleTracker against no tracker on a Sequential of many tiny Linear modules, in-process rounds;
mode baseline).
"""

import argparse
import contextlib
import ctypes
import json
import os
import sys
import time

import ab
import torch
from modes import BY_NAME, MODES, NAMES, TRACKER_NAMES, help_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HELPER_DIR = os.environ.get(
    "FQNTRACE_BENCH_HELPERS", os.path.join(ROOT, "build", "bench", "empty_observer")
)


def probe():
    """RecordFunction's own view: is any callback installed for FUNCTION-scope ops?"""
    lib = ctypes.CDLL(os.path.join(HELPER_DIR, "libcallback_probe.so"))
    return {
        "global_callbacks": bool(lib.fqntrace_bench_has_global_callbacks()),
        "function_scope_active": bool(lib.fqntrace_bench_function_scope_active()),
    }


def rss_kb(field="VmRSS"):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def fqn_recorder():
    """ModTracker + a TorchDispatchMode that records, for every op, the fqns of the modules it
    runs in and whether it is backward: the pure-Python way to get what fqntrace records."""
    from torch.distributed._tools.mod_tracker import ModTracker
    from torch.utils._python_dispatch import TorchDispatchMode

    tracker, events = ModTracker(), []

    class RecordFqn(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            events.append((func, tuple(tracker.parents), tracker.is_bw))
            return func(*args, **(kwargs or {}))

    with tracker, RecordFqn():
        yield events


def set_up(mode):
    """Process-wide set-up and checks; returns facts about the mode for the JSON."""
    facts = {"mode": mode}
    traced = BY_NAME[mode].traced
    if traced:
        import fqntrace
        import fqntrace._hooks
        import fqntrace._native

        if not os.environ.get("FQNTRACE"):
            sys.exit("run_mode: the fqntrace modes need FQNTRACE set by the driver")
        fqntrace._native.load()
        assert fqntrace.tracing(), "fqntrace did not start although FQNTRACE is set"
        assert fqntrace._hooks.installed(), "fqntrace's module hooks are not installed"
        facts.update(trace=os.environ["FQNTRACE"], flops=os.environ.get("FQNTRACE_FLOPS") == "1")
        if mode == "fqntrace_nohooks":
            # No module has run yet, so no parameter hook exists either: only ops are observed.
            fqntrace._hooks.uninstall()
            facts["module_hooks"] = False
    else:
        assert not os.environ.get("FQNTRACE"), f"FQNTRACE must be unset in mode {mode}"
    if mode == "loaded_off":
        import fqntrace
        import fqntrace._native

        torch.ops.load_library(fqntrace.library_path())
        facts["running"] = bool(fqntrace._native.load().running())
        assert not facts["running"], "fqntrace runs a session although FQNTRACE is unset"
    if mode == "empty":
        torch.ops.load_library(os.path.join(HELPER_DIR, "libempty_observer.so"))
    if mode in ("empty_sampled", "empty_sampled_ops"):
        os.environ["FQNTRACE_BENCH_EMPTY_NODES"] = "1" if mode == "empty_sampled" else "0"
        torch.ops.load_library(os.path.join(HELPER_DIR, "libempty_sampled_observer.so"))
    facts.update(probe())
    expect_callback = mode.startswith("empty") or traced
    assert facts["global_callbacks"] == expect_callback, (mode, facts)
    return facts


def measuring(mode):
    """Context entered around the whole measurement (modes that are scoped, not process-wide)."""
    if mode.startswith("profiler"):
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU], with_stack=mode == "profiler_stack")
    return fqn_recorder() if mode == "modtracker" else contextlib.nullcontext()


def bench_ops(mode, args):
    a, b = torch.ones(4), torch.ones(4)
    n, add = args.ops, torch.add
    samples, thread_cpu, process_cpu = [], [], []
    with measuring(mode):
        for _ in range(args.warmup):
            for _ in range(n):
                add(a, b)
        for _ in range(args.samples):
            c0, p0, t0 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
            for _ in range(n):
                add(a, b)
            t1 = time.perf_counter_ns()
            samples.append((t1 - t0) / n)
            # CPU time of this thread alone (the observer's own work, without preemption) and of
            # the whole process (adds fqntrace's drain thread, which runs beside the loop).
            thread_cpu.append((time.thread_time_ns() - c0) / n)
            process_cpu.append((time.process_time_ns() - p0) / n)
    return {
        "unit": "ns/op",
        "ops_per_sample": n,
        "samples": samples,
        "thread_cpu_samples": thread_cpu,
        "process_cpu_samples": process_cpu,
    }


def mlp_step():
    """P1's MLP step: nn.Sequential of 4 Linear(16, 16) and 3 ReLU (8 module calls), batch 8,
    forward, backward, zero_grad."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16)]
    for _ in range(3):
        layers += [torch.nn.ReLU(), torch.nn.Linear(16, 16)]
    model, x = torch.nn.Sequential(*layers), torch.randn(8, 16)

    def step():
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)

    return step


def bench_mlp(mode, args):
    step = mlp_step()
    samples = []
    with measuring(mode):
        for _ in range(args.warmup * args.steps):
            step()
        for _ in range(args.samples):
            t0 = time.perf_counter_ns()
            for _ in range(args.steps):
                step()
            samples.append((time.perf_counter_ns() - t0) / args.steps / 1000.0)
    return {"unit": "us/step", "steps_per_sample": args.steps, "samples": samples}


def transformer_step(batch, compile=False):
    """P2's training step of fqntrace.demo's TinyTransformer (AdamW) as a function. compile:
    torch.compile the model (inductor)."""
    from fqntrace.demo import TinyTransformer

    torch.manual_seed(0)
    vocab, seq = 512, 128
    model = TinyTransformer(vocab=vocab, dim=256, heads=4, layers=4, seq=seq)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if compile:
        model = torch.compile(model)
    tokens, targets = torch.randint(vocab, (batch, seq)), torch.randint(vocab, (batch, seq))

    def step():
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def demo_step():
    """The demo transformer's training step (fqntrace.demo: TinyTransformer, 2 layers, dim 128,
    batch 8, AdamW): callgrind_ops.py's --demo workload."""
    from fqntrace.demo import TinyTransformer

    torch.manual_seed(0)
    vocab = 512
    model = TinyTransformer(vocab, 128, 4, 2, 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, vocab, (8, 65))

    def step():
        logits = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), data[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def bench_transformer_ab(mode, args):
    """P2 inside one process, through the A/B harness (bench/ab.py's traced_blocks): untraced
    blocks (A) and blocks traced by fqntrace.profile (B). Needs mode baseline (FQNTRACE unset).
    The parameter hooks that stay in untraced blocks cost ~0.02 % of a step."""
    import tempfile

    # Compiled (--compile) with inductor: the warm-up below compiles both arms, untraced (no
    # module hooks) and traced (fqntrace's hooks, which Dynamo guards on), so no block recompiles.
    step = transformer_step(args.batch, compile=args.compile)
    events = 0
    with tempfile.TemporaryDirectory(prefix="fqntrace-ab-") as tmp:
        path = os.path.join(tmp, "ab.json")

        def count_events():  # the trace of a traced block: one event a line but 2
            nonlocal events
            with open(path, "rb") as trace:
                events += sum(1 for _ in trace) - 2

        for _ in range(args.warmup):
            step()
        blocks = ab.traced_blocks(step, args.blocks, args.steps, path, count_events)
    untraced, traced = ab.arms(blocks)
    result = dict(unit="ms/step", batch=args.batch, blocks=blocks, steps_per_block=args.steps)
    samples = {"baseline": untraced, "fqntrace": traced}
    return result | {"samples": samples, "traced_event_lines": events}


def bench_rss(mode, args):
    """Tiny ops in a loop; RSS every ~interval s. Stops at args.ops ops or args.budget seconds."""
    a, b = torch.ones(4), torch.ones(4)
    add, chunk = torch.add, 10000
    points, done = [], 0  # points: (seconds, ops done, RSS kB)
    with measuring(mode):
        t0 = last = time.perf_counter()
        points.append((0.0, 0, rss_kb()))
        while done < args.ops:
            for _ in range(chunk):
                add(a, b)
            done += chunk
            now = time.perf_counter()
            if now - last >= args.interval:
                points.append((now - t0, done, rss_kb()))
                last = now
            if now - t0 >= args.budget:
                break
        elapsed = time.perf_counter() - t0
        points.append((elapsed, done, rss_kb()))
        hwm_kb = rss_kb("VmHWM")
        t_exit = time.perf_counter()
    result = {"ops": done, "seconds": elapsed, "points": points, "hwm_kb": hwm_kb}
    result["stopped_by_budget"] = done < args.ops
    if mode.startswith("profiler"):
        # On exit the profiler collects what it kept (Kineto's result objects); that memory is
        # part of what it costs before anything is exported. prof.events() (the Python
        # FunctionEvent list, far larger and ~50 us/event to build) is deliberately not called.
        result["exit_seconds"] = time.perf_counter() - t_exit
        result["rss_after_exit_kb"] = rss_kb()
        result["hwm_after_exit_kb"] = rss_kb("VmHWM")
    return result


def bench_trackers(mode, args):
    """P3: per step, `model(x).sum().backward()` on a Sequential of args.modules Linear(8, 8)
    (batch 4) inside `with tracker:`, per tracker variant. The trackers are context managers, not
    process-wide, so the variants share this process and alternate: each round times args.steps
    steps of every variant, in an order that rotates every round. Each variant has its own model
    instance: fqntrace's tracker hooks the parameters of the modules it names (AccumulateGrad
    attribution) and those hooks outlive the context, so a shared model would slow the others.
    Needs mode baseline (FQNTRACE unset: no session, so no trace is written)."""
    from fqntrace import ModTracker, ModuleTracker
    from torch.distributed._tools.mod_tracker import ModTracker as TorchModTracker
    from torch.utils.module_tracker import ModuleTracker as TorchModuleTracker

    # In TRACKER_NAMES's order; None: no tracker.
    classes = (None, TorchModTracker, ModTracker, TorchModuleTracker, ModuleTracker)
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    setups = {}  # variant: (its own model, its tracker)
    for name, cls in zip(TRACKER_NAMES, classes):
        model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(args.modules)])
        setups[name] = model, cls() if cls else None
    samples, thread_cpu = {name: [] for name in TRACKER_NAMES}, {name: [] for name in TRACKER_NAMES}

    def run(name, steps):
        model, tracker = setups[name]
        for _ in range(steps):
            if tracker is None:
                model(x).sum().backward()
            else:
                with tracker:
                    model(x).sum().backward()

    for name in TRACKER_NAMES:  # warm-up: names the modules, hooks the parameters, fills caches
        run(name, args.warmup * args.steps)
    for r in range(args.rounds):
        k = r % len(TRACKER_NAMES)
        for name in TRACKER_NAMES[k:] + TRACKER_NAMES[:k]:
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            run(name, args.steps)
            samples[name].append((time.perf_counter_ns() - t0) / args.steps / 1e6)
            thread_cpu[name].append((time.thread_time_ns() - c0) / args.steps / 1e6)
    result = {"unit": "ms/step", "modules": args.modules, "steps_per_sample": args.steps}
    return result | {"rounds": args.rounds, "samples": samples, "thread_cpu_samples": thread_cpu}


BENCHES = {
    f.__name__.removeprefix("bench_"): f
    for f in (bench_ops, bench_mlp, bench_transformer_ab, bench_rss, bench_trackers)
}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modes:\n" + "\n".join(map(help_line, MODES)),
    )
    add = parser.add_argument
    add("--mode", choices=NAMES, required=True)
    add("--bench", required=True, help="comma-separated: " + ",".join(BENCHES))
    add("--threads", type=int, default=1, help="torch.set_num_threads")
    add("--samples", type=int, default=7)
    add("--warmup", type=int, default=1, help="samples (ops, mlp) or steps")
    add("--ops", type=int, default=20000, help="ops per sample (ops); total (rss)")
    add("--steps", type=int, default=50, help="steps per sample (mlp) or block (transformer_ab)")
    add("--batch", type=int, default=8)
    add("--blocks", type=int, default=16, help="transformer_ab: alternating blocks")
    add("--compile", action="store_true", help="transformer_ab: torch.compile the model")
    add("--modules", type=int, default=200, help="trackers: Linear modules")
    add("--rounds", type=int, default=20, help="trackers: in-process rounds")
    add("--budget", type=float, default=120.0, help="rss: seconds at most")
    add("--interval", type=float, default=0.5, help="rss: seconds between samples")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    out = {"facts": set_up(args.mode), "threads": torch.get_num_threads(), "pid": os.getpid()}
    for name in args.bench.split(","):
        out[name] = BENCHES[name](args.mode, args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
