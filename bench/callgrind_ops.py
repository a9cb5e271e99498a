"""Instructions per torch.add and per MLP step under callgrind, per mode: a noise-free view of
the hot path.

    .venv/bin/python bench/callgrind_ops.py [--ops 20000] [--mlp-steps 200] [--jobs 2]

Each (mode, workload) runs in its own process under `valgrind --tool=callgrind
--instr-atstart=no`; the child sets the mode up (bench/run_mode.py's set_up), warms up, then
switches instrumentation on with callgrind_control around exactly --ops calls of torch.add on
4-element tensors, or --mlp-steps steps of P1's MLP. Reported: the loop thread's instructions per
op/step, other threads' (fqntrace's drain thread), and for fqntrace the inclusive cost of its two
callbacks. With --whole, also the whole run of a trace file (whole_run()). Prints JSON.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from modes import CALLGRIND_DDP_STEP_MODES, CALLGRIND_MLP_MODES, CALLGRIND_OPS_MODES, environment

# The whole run: no tool, and the two tools that write a trace file.
WHOLE_RUN_MODES = ("baseline", "fqntrace", "profiler")

HERE = os.path.dirname(os.path.abspath(__file__))


def child(mode, what, count):
    sys.path.insert(0, HERE)
    import run_mode
    import torch

    torch.set_num_threads(1)
    run_mode.set_up(mode)
    if what == "whole":
        whole_run(mode, count)
        return
    if what == "ops":
        a, b = torch.ones(4), torch.ones(4)

        def work():
            torch.add(a, b)
    else:
        steps = {"ddpstep": ddp_model_step, "demo": run_mode.demo_step, "mlp": run_mode.mlp_step}
        work = steps[what]()

    # torch.profiler is scoped: entered before the warm-up, left after the count (what it does at
    # exit, collecting its events, is not counted: its cost is measured while it records).
    with run_mode.measuring(mode):
        for _ in range(3 if what == "demo" else 10 if what == "ddpstep" else max(200, count // 10)):
            work()
        callgrind_switch("on")
        for _ in range(count):
            work()
        if what == "ddpstep" and mode.startswith("fqntrace"):
            import fqntrace._native

            fqntrace._native.load().flush()  # the drain's work for these steps, inside the window
        callgrind_switch("off")


def ddp_model_step():
    """P8's model and step (bench/distributed/ddp_ab.py) in one process without DDP: the work a
    rank does between its all-reduces."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python", "dist_scripts"))
    from train import VOCAB, TinyLM, lm_step

    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)

    def step():
        lm_step(model, opt, torch.randint(0, VOCAB, (4, 32), generator=gen))

    return step


def callgrind_switch(state):
    switch = ["callgrind_control", "-i", state, str(os.getpid())]
    subprocess.run(switch, capture_output=True, check=True)


def whole_run(mode, count):
    """The whole cost of a trace file of `count` tiny ops: the ops, and everything the tool does
    until its file is written (torch.profiler: start, stop and export_chrome_trace; fqntrace:
    its drain, and the session's stop, which writes the file's tail and closes it). The warm-up
    runs outside the window (fqntrace: flushed to its file first). Fixed costs (a profiler's
    start, a file's tail) cancel in the slope between two counts (main())."""
    import run_mode
    import torch

    a, b = torch.ones(4), torch.ones(4)
    for _ in range(2000):
        torch.add(a, b)
    if mode.startswith("fqntrace"):
        import fqntrace._native

        fqntrace._native.load().flush()
    callgrind_switch("on")
    if mode == "profiler":
        with run_mode.measuring(mode) as prof:
            for _ in range(count):
                torch.add(a, b)
        prof.export_chrome_trace(os.environ["FQNTRACE_BENCH_EXPORT"])
    else:
        for _ in range(count):
            torch.add(a, b)
        if mode.startswith("fqntrace"):
            fqntrace._native.load().stop()
    callgrind_switch("off")


def totals(path):
    out = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True).stdout
    match = re.search(r"^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS", out, re.M)
    return int(match.group(1).replace(",", "")) if match else 0


def inclusive(path, pattern):
    """Inclusive Ir of the function whose summary line matches pattern (0 if absent)."""
    annotate = ["callgrind_annotate", "--inclusive=yes", "--threshold=100", path]
    out = subprocess.run(annotate, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)$", line)
        if m and re.search(pattern, m.group(2)) and not m.group(2).startswith("=>"):
            return int(m.group(1).replace(",", ""))
    return 0


def run(mode, what, count, outdir):
    tag = f"{mode}.{what}.{count}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(environment(mode, os.path.join(outdir, f"{tag}.json")))
    env["FQNTRACE_BENCH_EXPORT"] = os.path.join(outdir, f"{tag}.export.json")
    # One hash seed for every process: with a random one the interpreter's own instructions per
    # op moved by ~20 between two runs of the same mode (dict probes), as much as a change to the
    # callbacks moves; with it, a mode's count repeats to the instruction.
    env["PYTHONHASHSEED"] = "0"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
    cmd += [f"--callgrind-out-file={os.path.join(outdir, 'cg.' + tag)}.%p", sys.executable]
    cmd += [os.path.abspath(__file__), "--child", mode, "--what", what, "--count", str(count)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind {tag} failed:\n{proc.stderr[-2000:]}")
    files = sorted(f for f in os.listdir(outdir) if f.startswith(f"cg.{tag}.") and "-" in f)
    irs = {f: totals(os.path.join(outdir, f)) for f in files}  # instructions per thread
    main = os.path.join(outdir, next(f for f in files if f.endswith("-01")))
    if what == "whole":  # every thread, the process's whole window
        return what, mode, {"count": count, "ir": sum(irs.values())}
    if what in ("ddpstep", "demo"):
        result = {"steps": count, "all_threads_ir_per_step": sum(irs.values()) / count}
        return what, mode, result | {"main_thread_ir_per_step": totals(main) / count}
    unit = "op" if what == "ops" else "step"
    others = sum(n for f, n in irs.items() if not f.endswith("-01"))
    result = {f"main_thread_ir_per_{unit}": totals(main) / count}
    result[f"other_threads_ir_per_{unit}"] = others / count
    if what == "ops":
        run_record_function = inclusive(main, r"Dispatcher::runRecordFunction")
        result["run_record_function_ir_per_op"] = run_record_function / count
        if mode.startswith("fqntrace"):
            result["on_start_ir_per_op"] = inclusive(main, r"observer.*on_start\(") / count
            result["on_end_ir_per_op"] = inclusive(main, r"observer.*on_end\(") / count
    return what, mode, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--child")
    add("--what", choices=["ops", "mlp", "whole", "ddpstep", "demo"], default="ops")
    add("--count", type=int, default=20000, help="child: ops or MLP steps")
    add("--ops", type=int, default=20000)
    add("--mlp-steps", type=int, default=200)
    add("--jobs", type=int, default=2)
    whole = "also the whole run (ops until the trace file is written) of fqntrace and "
    add("--whole", action="store_true", help=whole + "torch.profiler, per op from the slope")
    add("--whole-ops", type=int, default=20000, help="the slope between half as many and this")
    add("--only-whole", action="store_true", help="only the whole run")
    add("--ddp-steps", type=int, default=0, help="also P8c: steps of P8's model per mode (0: none)")
    add("--only-ddp-step", action="store_true", help="only P8c")
    add("--modes", help="only these modes (comma-separated; default: all)")
    demo = "also the demo transformer's training step (run_mode.demo_step): steps per mode"
    add("--demo-steps", type=int, default=0, help=demo + " (0: none)")
    add("--only-demo", action="store_true", help="only the demo step")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.what, args.count)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print(json.dumps({"skipped": "valgrind not installed"}))
        return
    outdir = tempfile.mkdtemp(prefix="fqntrace-callgrind-")
    jobs = []
    if not (args.only_whole or args.only_ddp_step or args.only_demo):
        jobs += [(m, "ops", args.ops) for m in CALLGRIND_OPS_MODES]
        jobs += [(m, "mlp", args.mlp_steps) for m in CALLGRIND_MLP_MODES]
    if (args.whole or args.only_whole) and not (args.only_ddp_step or args.only_demo):
        counts = (args.whole_ops // 2, args.whole_ops)
        jobs += [(m, "whole", n) for m in WHOLE_RUN_MODES for n in counts]
    if (args.ddp_steps > 0 or args.only_ddp_step) and not args.only_demo:
        jobs += [(m, "ddpstep", args.ddp_steps or 20) for m in CALLGRIND_DDP_STEP_MODES]
    if args.demo_steps > 0 or args.only_demo:
        jobs += [(m, "demo", args.demo_steps or 10) for m in CALLGRIND_MLP_MODES]
    if args.modes:
        jobs = [job for job in jobs if job[0] in args.modes.split(",")]
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            done = list(pool.map(lambda job: run(*job, outdir), jobs))
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    out = dict(ops=args.ops, mlp_steps=args.mlp_steps, whole_ops=args.whole_ops, modes={}, mlp={})
    whole = {}  # mode: its two whole runs
    for what, mode, result in done:
        if what in ("ddpstep", "demo"):
            out.setdefault("ddp_step" if what == "ddpstep" else "demo_step", {})[mode] = result
        elif what == "whole":
            whole.setdefault(mode, []).append(result)
        else:
            out["modes" if what == "ops" else "mlp"][mode] = result
    for mode, runs in whole.items():  # the slope between the two counts: fixed costs cancel
        small, big = sorted(runs, key=lambda r: r["count"])
        ir_per_op = (big["ir"] - small["ir"]) / (big["count"] - small["count"])
        out.setdefault("whole", {})[mode] = {"runs": [small, big], "ir_per_op": ir_per_op}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
