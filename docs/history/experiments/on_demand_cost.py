"""What on demand costs and how well it captures (docs/on-demand.md, docs/benchmarks.md P10).

    .venv/bin/python docs/history/experiments/on_demand_cost.py callgrind [--what mlp|demo] [--steps N] [--modes ...]
    .venv/bin/python docs/history/experiments/on_demand_cost.py ab [--blocks 12] [--block-steps 20]
    .venv/bin/python docs/history/experiments/on_demand_cost.py shares [--steps 1000]
    .venv/bin/python docs/history/experiments/on_demand_cost.py latency [--captures 10]
    .venv/bin/python docs/history/experiments/on_demand_cost.py ranks [--captures 20]

callgrind: loop-thread (and all-thread) instructions per training step under valgrind, each mode
in its own process, the steps counted between two callgrind_control switches after a warm-up:
untraced, armed (FQNTRACE_STEPS=demand), always-on (armed + one step of every 50 + the slow-step
trigger at 3x) and full. mlp: P1's MLP (4 x Linear(16,16) + ReLU) with its SGD step; demo: the
demo transformer's training step (AdamW). ab: armed against untraced in one process, blocks of
steps alternating ABBA (fqntrace.profile(..., steps="demand") around the armed blocks). shares:
the demo trained --steps steps fully traced and always-on: per-module shares of the step from
the windows against the full trace. latency: an armed loop captured --captures times from
another process; per capture, the time from the request's creation to its first recorded step.
ranks: torchrun, 2 gloo ranks, --captures captures during one run; both ranks' step numbers per
capture, validate on every file, the cross-rank summary printed. Prints JSON.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BENCH = os.path.join(ROOT, "bench")
LOOP = os.path.join(ROOT, "tests", "python", "ondemand_scripts", "loop.py")
sys.path.insert(0, BENCH)  # the demo step (run_mode.py), the A/B harness, callgrind_ops
import ab  # noqa: E402
from callgrind_ops import callgrind_switch, totals  # noqa: E402

MODES = {
    "untraced": {},
    "armed": {"FQNTRACE_STEPS": "demand"},
    "always_on": {"FQNTRACE_STEPS": "0:1:50,demand", "FQNTRACE_CAPTURE_SLOW": "3"},
    "full": {"FQNTRACE_STEPS": ""},
    # The always-on recipe with a window every 5 steps: under callgrind a demo step takes ~40 s,
    # so the demo's 1-in-50 figure is derived from this one (docs/on-demand.md says how).
    "always_on_p5": {"FQNTRACE_STEPS": "0:1:5,demand", "FQNTRACE_CAPTURE_SLOW": "3"},
    # A window that is never reached: the reference for what being armed may cost.
    "never_window": {"FQNTRACE_STEPS": "1000000:1000001"},
}


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}


def mode_env(mode, trace):
    env = clean_env()
    env["OMP_NUM_THREADS"] = "1"
    # The same hash seed in every mode: dict layouts (and so Python's own instruction counts)
    # otherwise differ from process to process by a few tenths of a percent.
    env["PYTHONHASHSEED"] = "0"
    if mode != "untraced":
        env["FQNTRACE"] = trace
        env.update({k: v for k, v in MODES[mode].items() if v})
    return env


def mlp_step():
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 16)

    def step():
        loss = model(x).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def demo_step():
    from run_mode import demo_step as make

    return make()


def child(what, steps, warmup):
    import torch

    torch.set_num_threads(1)
    step = mlp_step() if what == "mlp" else demo_step()
    for _ in range(warmup):
        step()
    callgrind_switch("on")
    for _ in range(steps):
        step()
    callgrind_switch("off")


def callgrind_one(mode, what, steps, warmup, outdir):
    tag = f"{mode}.{what}"
    trace = os.path.join(outdir, f"{tag}.json")
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={os.path.join(outdir, 'cg.' + tag)}.%p",
        sys.executable,
        os.path.abspath(__file__),
        "child",
        "--what",
        what,
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
    ]
    proc = subprocess.run(
        cmd, env=mode_env(mode, trace), cwd=outdir, capture_output=True, text=True, timeout=7200
    )
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind {tag} failed:\n{proc.stderr[-3000:]}")
    files = sorted(f for f in os.listdir(outdir) if f.startswith(f"cg.{tag}.") and "-" in f)
    main = next(f for f in files if f.endswith("-01"))
    written = sorted(os.path.basename(p) for p in glob.glob(os.path.join(outdir, f"{tag}*.json")))
    return mode, {
        "loop_thread_ir_per_step": totals(os.path.join(outdir, main)) / steps,
        "all_threads_ir_per_step": sum(totals(os.path.join(outdir, f)) for f in files) / steps,
        "files": written,
    }


def cmd_callgrind(args):
    modes = args.modes.split(",")
    outdir = tempfile.mkdtemp(prefix="ondemand-cg-")
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for mode, r in pool.map(
            lambda m: callgrind_one(m, args.what, args.steps, args.warmup, outdir), modes
        ):
            results[mode] = r
    base = results.get("untraced")
    if base:
        for mode, r in results.items():
            if not isinstance(r, dict):
                continue
            for key in ("loop_thread_ir_per_step", "all_threads_ir_per_step"):
                r[key.replace("_ir_per_step", "_added_pct")] = round(
                    100.0 * (r[key] / base[key] - 1), 3
                )
    if args.keep:
        results["outdir"] = outdir
    else:
        shutil.rmtree(outdir, ignore_errors=True)
    return {"what": args.what, "steps": args.steps, "warmup": args.warmup, "modes": results}


def cmd_ab(args):
    """Armed (B) against untraced (A) in one process: the A/B harness (bench/ab.py) over blocks
    of the demo step, each block's mean step."""
    import fqntrace
    import fqntrace._hooks
    import torch

    torch.set_num_threads(1)
    step = demo_step()
    for _ in range(5):
        step()
    outdir = tempfile.mkdtemp(prefix="ondemand-ab-")

    def block(armed):
        if not armed:
            return [statistics.fmean(ab.timed(step, args.block_steps))]
        with fqntrace.profile(os.path.join(outdir, "ab.json"), steps="demand"):
            per_step = statistics.fmean(ab.timed(step, args.block_steps))
        fqntrace._hooks.uninstall()  # untraced blocks run torch's own nn.Module.__call__
        return [per_step]

    blocks = ab.run(args.blocks, block)
    shutil.rmtree(outdir, ignore_errors=True)
    untraced, armed = ab.arms(blocks)
    ratios, noise = ab.group_changes(blocks), ab.null_changes(blocks)
    return {
        "block_steps": args.block_steps,
        "blocks": args.blocks,
        "ms_per_step": {
            "untraced": [round(v, 3) for v in untraced],
            "armed": [round(v, 3) for v in armed],
        },
        "armed_added_pct_per_quartet": [round(r, 2) for r in ratios],
        "armed_added_pct_median": round(statistics.median(ratios), 2),
        "untraced_vs_untraced_pct": [round(r, 2) for r in noise],
        "noise_pct_median_abs": round(statistics.median(abs(r) for r in noise), 2),
    }


def run_demo(steps, env, cwd):
    code = (
        "import sys; sys.path.insert(0, %r)\nimport torch\ntorch.set_num_threads(1)\n"
        "from run_mode import demo_step\nstep = demo_step()\nfor _ in range(%d): step()\n"
        % (BENCH, steps)
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return proc


def shares(path):
    """Each module's share of the op time of the steps kept (step 0 left out, as summary does):
    its op time summed over those steps over theirs, from the per-step times summary uses."""
    from fqntrace.analysis import steps, summarize

    summary, times = summarize.summarize_with_steps(path)
    kept = [s for s in steps.per_step_from(times) if s["step"] != 0]
    total = sum(sum(s["op_ms"].values()) for s in kept)
    out = {}
    for s in kept:
        for fqn, phases in s["modules"].items():
            out[fqn] = out.get(fqn, 0.0) + 100.0 * sum(phases) / total
    return out, {"steps": {"count": len(kept)}}


def cmd_shares(args):
    outdir = (
        os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="ondemand-shares-")
    )
    os.makedirs(outdir, exist_ok=True)
    full = os.path.join(outdir, "full.json")
    on = os.path.join(outdir, "always_on.json")
    if not (args.reuse and os.path.exists(full) and os.path.exists(on)):
        run_demo(args.steps, mode_env("full", full), outdir)
        run_demo(args.steps, mode_env("always_on", on), outdir)
    a, sa = shares(full)
    b, sb = shares(on)
    rows = []
    for fqn in sorted(a, key=lambda f: -a[f]):
        if a[fqn] > 2.0:
            rows.append(
                {
                    "fqn": fqn,
                    "full_pct": round(a[fqn], 2),
                    "windows_pct": round(b.get(fqn, 0.0), 2),
                    "diff_pp": round(b.get(fqn, 0.0) - a[fqn], 2),
                }
            )
    captures = sorted(glob.glob(os.path.join(outdir, "always_on.capture-*.json")))
    result = {
        "steps": args.steps,
        "full_steps": sa["steps"]["count"],
        "window_steps": sb["steps"]["count"],
        "rows_above_2pct": rows,
        "max_abs_diff_pp": max(abs(r["diff_pp"]) for r in rows),
        "slow_captures": len(captures),
    }
    if not args.keep:
        shutil.rmtree(outdir, ignore_errors=True)
    return result


def start_loop(cwd, *extra, torchrun=False, env_extra=None):
    env = clean_env()
    env.update(
        {"OMP_NUM_THREADS": "1", "FQNTRACE": "traces/run.{rank}.json", "FQNTRACE_STEPS": "demand"}
    )
    env.update(env_extra or {})
    cmd = [
        sys.executable,
        LOOP,
        "--steps",
        "10000000",
        "--until-file",
        os.path.join(cwd, "stop"),
        *extra,
    ]
    if torchrun:
        cmd = [
            os.path.join(os.path.dirname(sys.executable), "torchrun"),
            "--standalone",
            "--nproc_per_node=2",
            *cmd[1:],
        ]
    os.makedirs(os.path.join(cwd, "traces"), exist_ok=True)
    return subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_records(cwd, n):
    deadline = time.time() + 120
    while time.time() < deadline:
        ok = 0
        for p in glob.glob(os.path.join(cwd, "traces", ".fqntrace", "*.status")):
            try:
                s = json.loads(open(p).read().strip())
            except ValueError:
                continue
            ok += s.get("steps_per_s", 0) > 0 and s.get("step", 0) > 20
        if ok >= n:
            return
        time.sleep(0.2)
    raise RuntimeError("no status records")


def capture_cli(cwd, *args):
    env = clean_env()
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", "capture", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def first_step_wall(path):
    with open(path) as f:
        trace = json.load(f)
    steps = sorted(
        (e["ts"], e["dur"])
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    base = trace["baseTimeNanoseconds"] / 1e9
    return (
        base + steps[0][0] / 1e6,
        statistics.median(d for _, d in steps) / 1e6,
        trace["capture"]["id"],
    )


def cmd_latency(args):
    cwd = tempfile.mkdtemp(prefix="ondemand-latency-")
    job = start_loop(cwd, "--sleep", str(args.sleep))
    rows = []
    try:
        wait_records(cwd, 1)
        for n in range(1, args.captures + 1):
            proc = capture_cli(cwd, "traces/run.*.json", "--steps", "3", "--no-summary")
            if proc.returncode != 0:
                rows.append({"capture": n, "failed": proc.stderr.strip()[-300:]})
                continue
            request = json.load(open(os.path.join(cwd, "traces", ".fqntrace", "request.json")))
            start, step_s, cid = first_step_wall(
                os.path.join(cwd, "traces", f"run.0.capture-{n}.json")
            )
            assert cid == request["id"]
            rows.append(
                {
                    "capture": n,
                    "latency_s": round(start - request["created"], 3),
                    "step_s": round(step_s, 4),
                    "within_target": start - request["created"] <= 1.0 + step_s,
                }
            )
    finally:
        open(os.path.join(cwd, "stop"), "w").close()
        job.communicate(timeout=120)
    shutil.rmtree(cwd, ignore_errors=True)
    lat = [r["latency_s"] for r in rows if "latency_s" in r]
    return {
        "sleep_s": args.sleep,
        "captures": rows,
        "latency_median_s": statistics.median(lat) if lat else None,
        "latency_max_s": max(lat) if lat else None,
        "within_target": sum(1 for r in rows if r.get("within_target")),
        "of": len(rows),
    }


def cmd_ranks(args):
    cwd = tempfile.mkdtemp(prefix="ondemand-ranks-")
    job = start_loop(cwd, "--sleep", str(args.sleep), torchrun=True)
    rows = []
    try:
        wait_records(cwd, 2)
        for n in range(1, args.captures + 1):
            proc = capture_cli(cwd, "traces/run.{rank}.json", "--steps", "3", "--roundup", "5")
            row = {
                "capture": n,
                "rc": proc.returncode,
                "cross_rank_summary": "DistributedDataParallel" in proc.stdout,
            }
            steps, valid = [], []
            for r in (0, 1):
                path = os.path.join(cwd, "traces", f"run.{r}.capture-{n}.json")
                if not os.path.exists(path):
                    steps.append(None)
                    valid.append(False)
                    continue
                trace = json.load(open(path))
                steps.append(
                    sorted(
                        int(e["name"].split("#")[1])
                        for e in trace["traceEvents"]
                        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                    )
                )
                v = subprocess.run(
                    [sys.executable, "-m", "fqntrace", "validate", path],
                    capture_output=True,
                    text=True,
                    env=clean_env(),
                )
                valid.append(v.returncode == 0)
            row.update(
                {
                    "steps_rank0": steps[0],
                    "steps_rank1": steps[1],
                    "same_steps": steps[0] == steps[1] and steps[0] is not None,
                    "both_validate": all(valid),
                }
            )
            if proc.returncode != 0:
                row["stderr"] = proc.stderr.strip()[-300:]
            rows.append(row)
    finally:
        open(os.path.join(cwd, "stop"), "w").close()
        out, err = job.communicate(timeout=300)
    shutil.rmtree(cwd, ignore_errors=True)
    good = sum(
        1
        for r in rows
        if r["rc"] == 0 and r["same_steps"] and r["both_validate"] and r["cross_rank_summary"]
    )
    return {
        "sleep_s": args.sleep,
        "captures": rows,
        "good": good,
        "of": len(rows),
        "job_ranks_done": [f"rank {r} done" in out for r in (0, 1)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("child")
    c.add_argument("--what", default="mlp")
    c.add_argument("--steps", type=int, default=200)
    c.add_argument("--warmup", type=int, default=20)
    g = sub.add_parser("callgrind")
    g.add_argument("--what", choices=["mlp", "demo"], default="mlp")
    g.add_argument("--steps", type=int, default=200)
    g.add_argument("--warmup", type=int, default=20)
    g.add_argument("--modes", default="untraced,armed,always_on,full")
    g.add_argument("--jobs", type=int, default=2)
    g.add_argument("--keep", action="store_true", help="keep the callgrind files (prints where)")
    b = sub.add_parser("ab")
    b.add_argument("--blocks", type=int, default=16)
    b.add_argument("--block-steps", type=int, default=20)
    s = sub.add_parser("shares")
    s.add_argument("--steps", type=int, default=1000)
    s.add_argument("--keep", metavar="DIR", help="write the two traces here and keep them")
    s.add_argument("--reuse", action="store_true", help="with --keep: summarize the traces there")
    lat = sub.add_parser("latency")
    lat.add_argument("--captures", type=int, default=10)
    lat.add_argument("--sleep", type=float, default=0.02)
    r = sub.add_parser("ranks")
    r.add_argument("--captures", type=int, default=20)
    r.add_argument("--sleep", type=float, default=0.01)
    args = ap.parse_args()
    if args.cmd == "child":
        return child(args.what, args.steps, args.warmup)
    result = {
        "callgrind": cmd_callgrind,
        "ab": cmd_ab,
        "shares": cmd_shares,
        "latency": cmd_latency,
        "ranks": cmd_ranks,
    }[args.cmd](args)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
