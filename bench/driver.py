"""Runs the fqntrace benchmarks (P1 … P8): every mode in its own process (bench/run_mode.py),
modes interleaved in rounds (the order rotates each round), medians. Writes bench/results.json
(machine, torch, date, every raw sample) and fills the generated sections of docs/benchmarks.md
through bench/report.py.

    .venv/bin/python bench/driver.py [--quick]      # scripts/bench.sh runs this after set-up

On a noisy 2-core machine single numbers mean little: each process reports the median of its
samples, the tables show the median over rounds, and derived numbers (added ns/op, slowdowns) are
computed per round against that round's baseline process before taking the median.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from modes import P1_MODES, P2_MODES, TRACKER_NAMES, environment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable

SETTINGS = {
    # rounds, ops per sample, samples per process, MLP steps per sample, transformer steps ...
    "full": {"p1_rounds": 8, "p1_ops": 20000, "p1_samples": 9, "mlp_steps": 50,
             "p2_rounds": 6, "p2_steps": 8, "p2_warmup": 2,
             "p2ab_processes": 2, "p2ab_blocks": 24, "p2ab_steps": 2,
             "p5_ops": 10_000_000, "p5_budget": 120.0, "p5_profiler_ops": 1_000_000,
             "p5_baseline_ops": 5_000_000, "callgrind_ops": 5000, "callgrind_mlp_steps": 50, "callgrind_ddp_steps": 20,
             "p3_processes": 2, "p3_rounds": 30, "p3_steps": 4, "p3_modules": 200,
             "p4_repetitions": 7, "p4_min_time": 0.3, "p4_callgrind_events": 50_000,
             "p7_ops": 400_000, "p7_runs": 7, "p7_train_steps": 300, "p7_nice_ops": 3_000_000, "p7_nice": [0, 5, 10, 19],
             "p8_runs": 5, "p8_blocks": 32},
    "quick": {"p1_rounds": 3, "p1_ops": 20000, "p1_samples": 5, "mlp_steps": 30,
              "p2_rounds": 2, "p2_steps": 4, "p2_warmup": 2,
              "p2ab_processes": 1, "p2ab_blocks": 8, "p2ab_steps": 2,
              "p5_ops": 1_000_000, "p5_budget": 30.0, "p5_profiler_ops": 200_000,
              "p5_baseline_ops": 500_000, "callgrind_ops": 5000, "callgrind_mlp_steps": 50, "callgrind_ddp_steps": 20,
              "p3_processes": 1, "p3_rounds": 10, "p3_steps": 4, "p3_modules": 200,
              "p4_repetitions": 3, "p4_min_time": 0.2, "p4_callgrind_events": 30_000,
              "p7_ops": 200_000, "p7_runs": 3, "p7_train_steps": 150, "p7_nice_ops": 1_000_000, "p7_nice": [0, 5],
              "p8_runs": 2, "p8_blocks": 16},
}
P2_THREADS = 1


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values):
    return statistics.median(values) if values else None


def quartiles(values):
    if len(values) < 2:
        return [values[0], values[0]] if values else [None, None]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return [q[0], q[2]]


class Runner:
    def __init__(self, tmpdir):
        self.tmpdir = tmpdir
        self.count = 0

    def run(self, mode, benches, args, timeout=900):
        """One child process; returns its JSON (plus the trace facts for the fqntrace modes)."""
        self.count += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
        env.setdefault("OMP_NUM_THREADS", "1")
        tracing = environment(mode, os.path.join(self.tmpdir, f"run{self.count}.json"))
        env.update(tracing)
        trace = tracing.get("FQNTRACE")
        cmd = [PY, os.path.join(HERE, "run_mode.py"), "--mode", mode, "--bench", benches] + [
            str(a) for a in args]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if trace is not None:
            out["trace_file"] = trace_facts(trace)
            os.remove(trace)
        return out


def trace_facts(path):
    """Size, streaming line count and the footer of a Chrome trace (one event per line)."""
    size = os.path.getsize(path)
    newlines = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 24)
            if not block:
                break
            newlines += block.count(b"\n")
        f.seek(max(0, size - 4096))
        tail = f.read().decode("utf-8", "replace")
    footer = {}
    marker = tail.rfind('"fqntrace": ')
    if marker >= 0:
        try:
            footer = json.loads(tail[marker + len('"fqntrace": '):].rstrip().rstrip("}").strip() + "}")
        except ValueError:
            footer = {}
    lines = newlines + 1
    # Line 1 is the header, the last line the tail; every line between is one event.
    return {"bytes": size, "lines": lines, "event_lines": max(0, lines - 2), "footer": footer}


def machine():
    info = {"hostname": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
            "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    info["loadavg_start"] = os.getloadavg()
    return info


def torch_version():
    out = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def git_commit():
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def rotated(modes, r):
    k = r % len(modes)
    return modes[k:] + modes[:k]


def run_p1(runner, s):
    """P1 (per-op, MLP) and P6 (loaded_off): one process per mode per round."""
    raw = {m: {"ops": [], "mlp": []} for m in P1_MODES}
    facts = {}
    args = ["--ops", s["p1_ops"], "--samples", s["p1_samples"], "--steps", s["mlp_steps"],
            "--warmup", 1, "--threads", 1]
    for r in range(s["p1_rounds"]):
        t0 = time.time()
        for mode in rotated(P1_MODES, r):
            out = runner.run(mode, "ops,mlp", args)
            raw[mode]["ops"].append(out["ops"]["samples"])
            raw[mode].setdefault("ops_thread_cpu", []).append(out["ops"]["thread_cpu_samples"])
            raw[mode].setdefault("ops_process_cpu", []).append(out["ops"]["process_cpu_samples"])
            raw[mode]["mlp"].append(out["mlp"]["samples"])
            facts[mode] = out["facts"]
            if "trace_file" in out:
                facts[mode]["dropped_events_last_round"] = out["trace_file"]["footer"].get("dropped_events")
        base = median(raw["baseline"]["ops"][-1])
        fq = median(raw["fqntrace"]["ops"][-1])
        em = median(raw["empty"]["ops"][-1])
        log(f"P1 round {r + 1}/{s['p1_rounds']} ({time.time() - t0:.0f} s): baseline {base:.0f} "
            f"ns/op, empty +{em - base:.0f}, fqntrace +{fq - base:.0f}")
    return {"modes": list(P1_MODES), "rounds": s["p1_rounds"], "ops_per_sample": s["p1_ops"],
            "samples_per_process": s["p1_samples"], "mlp_steps_per_sample": s["mlp_steps"],
            "threads": 1, "raw": raw, "facts": facts}


def summarize_p1(p1):
    """Medians over rounds of each process's median, per mode; added = mode − baseline of those.

    Not paired per round: on this machine noise comes in bursts that hit single processes, and a
    paired difference is spoiled when either of its two processes is hit, while a median over
    rounds per mode shrugs off a minority of hit processes. The per-round spread is kept (IQR)."""
    raw = p1["raw"]
    per_round = {b: {m: [median(x) for x in raw[m][b]] for m in p1["modes"]} for b in ("ops", "mlp")}
    summary = {"ops": {}, "mlp": {}}
    base_ops = median(per_round["ops"]["baseline"])
    base_mlp = median(per_round["mlp"]["baseline"])
    base_best = min(min(x) for x in raw["baseline"]["ops"])
    base_thread = median([median(x) for x in raw["baseline"]["ops_thread_cpu"]])
    for m in p1["modes"]:
        ops = per_round["ops"][m]
        best = min(min(x) for x in raw[m]["ops"])
        thread_cpu = median([median(x) for x in raw[m]["ops_thread_cpu"]])
        summary["ops"][m] = {"ns_per_op": median(ops), "added_ns": median(ops) - base_ops,
                             "iqr_ns": quartiles(ops), "per_round": ops,
                             "thread_cpu_ns": thread_cpu,
                             "thread_cpu_added_ns": thread_cpu - base_thread,
                             "process_cpu_ns": median([median(x) for x in raw[m]["ops_process_cpu"]]),
                             "best_ns": best, "best_added_ns": best - base_best}
        mlp = per_round["mlp"][m]
        summary["mlp"][m] = {"us_per_step": median(mlp),
                             "slowdown_pct": 100.0 * (median(mlp) / base_mlp - 1.0),
                             "iqr_us": quartiles(mlp), "per_round": mlp,
                             "best_us": min(min(x) for x in raw[m]["mlp"])}
    best_mlp = summary["mlp"]["baseline"]["best_us"]
    for m in p1["modes"]:
        summary["mlp"][m]["best_slowdown_pct"] = 100.0 * (summary["mlp"][m]["best_us"] / best_mlp - 1.0)
    ops, mlp = summary["ops"], summary["mlp"]
    # A ratio over a cost that noise pushed to zero or below means nothing: None ("n/a").
    ratio = lambda a, b: a / b if b is not None and b > 0 else None  # noqa: E731
    summary["ratios"] = {
        "fqntrace_over_empty_added_ns": ratio(ops["fqntrace"]["added_ns"], ops["empty"]["added_ns"]),
        "fqntrace_over_profiler_added_ns": ratio(ops["fqntrace"]["added_ns"],
                                                 ops["profiler"]["added_ns"]),
        "fqntrace_flops_over_empty_added_ns": ratio(ops["fqntrace_flops"]["added_ns"],
                                                      ops["empty"]["added_ns"]),
        "mlp_fqntrace_over_empty_slowdown": ratio(mlp["fqntrace"]["slowdown_pct"],
                                                  mlp["empty"]["slowdown_pct"]),
        "mlp_fqntrace_nohooks_over_empty_slowdown": ratio(mlp["fqntrace_nohooks"]["slowdown_pct"],
                                                          mlp["empty"]["slowdown_pct"]),
        # Secondary views, less sensitive to noise bursts: best samples, and the loop thread's CPU.
        "best_fqntrace_over_empty_added_ns": ratio(ops["fqntrace"]["best_added_ns"],
                                                   ops["empty"]["best_added_ns"]),
        "best_fqntrace_over_profiler_added_ns": ratio(ops["fqntrace"]["best_added_ns"],
                                                      ops["profiler"]["best_added_ns"]),
        "thread_cpu_fqntrace_over_empty_added_ns": ratio(ops["fqntrace"]["thread_cpu_added_ns"],
                                                         ops["empty"]["thread_cpu_added_ns"]),
        "best_mlp_fqntrace_over_empty_slowdown": ratio(mlp["fqntrace"]["best_slowdown_pct"],
                                                       mlp["empty"]["best_slowdown_pct"]),
    }
    r = summary["ratios"]
    summary["targets"] = {
        "ops_vs_empty": {"target": "<= 1.5x", "value": r["fqntrace_over_empty_added_ns"],
                         "met": None if r["fqntrace_over_empty_added_ns"] is None
                         else r["fqntrace_over_empty_added_ns"] <= 1.5},
        "ops_vs_profiler": {"target": "<= 0.5x", "value": r["fqntrace_over_profiler_added_ns"],
                            "met": None if r["fqntrace_over_profiler_added_ns"] is None
                            else r["fqntrace_over_profiler_added_ns"] <= 0.5},
        "mlp_vs_empty": {"target": "<= 1.5x", "value": r["mlp_fqntrace_over_empty_slowdown"],
                         "met": None if r["mlp_fqntrace_over_empty_slowdown"] is None
                         else r["mlp_fqntrace_over_empty_slowdown"] <= 1.5},
    }
    # P6: libfqntrace.so loaded, FQNTRACE unset. Noise: the larger of 1 % and the baseline's IQR
    # over rounds; "within" when the difference of medians is inside it.
    base_iqr = quartiles(per_round["ops"]["baseline"])
    noise = max(0.01 * base_ops, base_iqr[1] - base_iqr[0])
    added = summary["ops"]["loaded_off"]["added_ns"]
    facts = p1["facts"].get("loaded_off", {})
    summary["p6"] = {
        "running": facts.get("running"), "global_callbacks": facts.get("global_callbacks"),
        "function_scope_active": facts.get("function_scope_active"),
        "added_ns": added, "best_added_ns": summary["ops"]["loaded_off"]["best_added_ns"],
        "noise_ns": noise, "within_noise": abs(added) <= noise,
        "mlp_slowdown_pct": summary["mlp"]["loaded_off"]["slowdown_pct"],
    }
    return summary


def run_p2(runner, s):
    raw = {m: [] for m in P2_MODES}
    dropped = []
    args = ["--steps", s["p2_steps"], "--warmup", s["p2_warmup"], "--threads", P2_THREADS,
            "--batch", 8]
    for r in range(s["p2_rounds"]):
        for mode in rotated(P2_MODES, r):
            out = runner.run(mode, "transformer", args)
            raw[mode].append(out["transformer"]["samples"])
            if "trace_file" in out:
                dropped.append(out["trace_file"]["footer"].get("dropped_events"))
        b, f = median(raw["baseline"][-1]), median(raw["fqntrace"][-1])
        log(f"P2 round {r + 1}/{s['p2_rounds']}: baseline {b:.1f} ms/step, fqntrace {f:.1f} "
            f"({100 * (f / b - 1):+.1f}%)")
    base = [median(x) for x in raw["baseline"]]
    fq = [median(x) for x in raw["fqntrace"]]
    paired = [100.0 * (f / b - 1.0) for f, b in zip(fq, base)]
    slow = 100.0 * (median(fq) / median(base) - 1.0)
    best = 100.0 * (min(min(x) for x in raw["fqntrace"]) / min(min(x) for x in raw["baseline"]) - 1.0)
    return {"model": "fqntrace.demo.TinyTransformer(vocab=512, dim=256, heads=4, layers=4, seq=128)",
            "batch": 8, "optimizer": "AdamW", "threads": P2_THREADS, "rounds": s["p2_rounds"],
            "steps_per_process": s["p2_steps"], "warmup_steps": s["p2_warmup"], "raw": raw,
            "dropped_events": dropped,
            "summary": {"baseline_ms": median(base), "fqntrace_ms": median(fq),
                        "baseline_iqr_ms": quartiles(base), "fqntrace_iqr_ms": quartiles(fq),
                        "slowdown_pct": slow, "paired_slowdown_pct_median": median(paired),
                        "paired_slowdown_pct_iqr": quartiles(paired), "best_slowdown_pct": best,
                        "target": "<= 3%", "met": slow <= 3.0}}


def run_p2_ab(runner, s, compiled=False):
    """P2 again, traced and untraced blocks alternating inside each process (fqntrace.profile);
    `compiled`: the model under torch.compile (inductor)."""
    per_process = []
    quads = []
    pooled = {"baseline": [], "fqntrace": []}
    args = ["--blocks", s["p2ab_blocks"], "--steps", s["p2ab_steps"], "--warmup", s["p2_warmup"],
            "--threads", P2_THREADS, "--batch", 8] + (["--compile"] if compiled else [])
    for i in range(s["p2ab_processes"]):
        out = runner.run("baseline", "transformer_ab", args)["transformer_ab"]
        b, f = median(out["samples"]["baseline"]), median(out["samples"]["fqntrace"])
        # Each A B B A group of blocks: traced mean over untraced mean, the most local comparison.
        blocks = out["blocks"]
        for g in range(0, len(blocks) - 3, 4):
            group = blocks[g:g + 4]
            a = [t for traced, times in group if not traced for t in times]
            t = [t for traced, times in group if traced for t in times]
            if a and t:
                quads.append(100.0 * (statistics.fmean(t) / statistics.fmean(a) - 1.0))
        per_process.append({"baseline_ms": b, "fqntrace_ms": f, "slowdown_pct": 100.0 * (f / b - 1.0),
                            "blocks": blocks, "traced_event_lines": out["traced_event_lines"]})
        for k in pooled:
            pooled[k] += out["samples"][k]
        log(f"P2 A/B{' compiled' if compiled else ''} process {i + 1}/{s['p2ab_processes']}: "
            f"untraced {b:.1f} ms/step, traced {f:.1f} "
            f"({100 * (f / b - 1):+.1f}%)")
    b, f = median(pooled["baseline"]), median(pooled["fqntrace"])
    steps_traced = len(pooled["fqntrace"]) + s["p2ab_blocks"] // 2 * s["p2ab_processes"]
    return {"processes": s["p2ab_processes"], "blocks": s["p2ab_blocks"],
            "steps_per_block": s["p2ab_steps"], "per_process": per_process,
            "summary": {"baseline_ms": b, "fqntrace_ms": f, "slowdown_pct": 100.0 * (f / b - 1.0),
                        "per_process_slowdown_pct": [p["slowdown_pct"] for p in per_process],
                        "best_slowdown_pct": 100.0 * (min(pooled["fqntrace"]) / min(pooled["baseline"]) - 1.0),
                        "group_slowdown_pct_median": median(quads), "group_slowdown_pct_iqr": quartiles(quads),
                        "groups": len(quads),
                        "events_per_step": sum(p["traced_event_lines"] for p in per_process) / steps_traced,
                        "target": "<= 3%", "met": 100.0 * (f / b - 1.0) <= 3.0}}


def run_p3(runner, s):
    """P3: fqntrace.ModTracker vs torch's ModTracker on a module-heavy model. The trackers are
    context managers, so their variants alternate inside each process (bench/run_mode.py
    bench_trackers); a few processes, so one unlucky process cannot decide the result."""
    args = ["--modules", s["p3_modules"], "--rounds", s["p3_rounds"], "--steps", s["p3_steps"],
            "--warmup", 1, "--threads", 1]
    raw = {v: [] for v in TRACKER_NAMES}
    cpu = {v: [] for v in TRACKER_NAMES}
    per_process = []
    for i in range(s["p3_processes"]):
        out = runner.run("baseline", "trackers", args)["trackers"]
        for v in TRACKER_NAMES:
            raw[v] += out["samples"][v]
            cpu[v] += out["thread_cpu_samples"][v]
        b = median(out["samples"]["none"])
        added = {v: median(out["samples"][v]) - b for v in TRACKER_NAMES}
        per_process.append({"none_ms": b, "added_ms": added})
        log(f"P3 process {i + 1}/{s['p3_processes']}: no tracker {b:.2f} ms/step, torch ModTracker "
            f"+{added['torch_modtracker']:.2f}, fqntrace.ModTracker +{added['fqntrace_modtracker']:.2f}")
    return {"model": f"nn.Sequential of {s['p3_modules']} nn.Linear(8, 8), batch 4, "
                     "forward + sum().backward() inside `with tracker:`",
            "modules": s["p3_modules"], "processes": s["p3_processes"], "rounds": s["p3_rounds"],
            "steps_per_sample": s["p3_steps"], "threads": 1, "variants": list(TRACKER_NAMES),
            "raw": raw, "thread_cpu": cpu, "per_process": per_process,
            "summary": summarize_p3(raw, cpu, s["p3_processes"])}


def summarize_p3(raw, cpu, processes):
    """Medians over all rounds of all processes; added = variant − no tracker. The ratio of the
    two ModTrackers' added times is also taken per round (each round's samples ran seconds apart
    in one process), median and IQR of those."""
    n = len(raw["none"])
    out = {"variants": {}, "rounds_total": n}
    base, base_cpu, base_best = median(raw["none"]), median(cpu["none"]), min(raw["none"])
    for v in TRACKER_NAMES:
        out["variants"][v] = {"ms_per_step": median(raw[v]), "iqr_ms": quartiles(raw[v]),
                              "added_ms": median(raw[v]) - base,
                              "thread_cpu_ms": median(cpu[v]),
                              "thread_cpu_added_ms": median(cpu[v]) - base_cpu,
                              "best_ms": min(raw[v]), "best_added_ms": min(raw[v]) - base_best}
    ratio = lambda a, b: a / b if b is not None and b > 0 else None  # noqa: E731
    var = out["variants"]

    def per_round(ours, theirs, data):
        vals = [ratio(o - b, t - b) for o, t, b in zip(data[ours], data[theirs], data["none"])]
        return [x for x in vals if x is not None]

    for pair, (ours, theirs) in {"modtracker": ("fqntrace_modtracker", "torch_modtracker"),
                                 "moduletracker": ("fqntrace_moduletracker",
                                                   "torch_moduletracker")}.items():
        rounds = per_round(ours, theirs, raw)
        out[pair] = {
            "ratio": ratio(var[ours]["added_ms"], var[theirs]["added_ms"]),
            "ratio_thread_cpu": ratio(var[ours]["thread_cpu_added_ms"],
                                      var[theirs]["thread_cpu_added_ms"]),
            "ratio_best": ratio(var[ours]["best_added_ms"], var[theirs]["best_added_ms"]),
            "ratio_per_round_median": median(rounds), "ratio_per_round_iqr": quartiles(rounds),
        }
    r = out["modtracker"]["ratio"]
    out["target"] = {"target": "<= 0.5x", "value": r, "met": None if r is None else r <= 0.5}
    return out


def run_p4(s):
    """P4: exporter throughput, C++ (Google Benchmark): build/fqntrace_exporter_bench. Wall and
    CPU time from Google Benchmark (repetitions interleaved at random), instructions per event
    from callgrind (bench binary's --plain mode, counting inside the drain only)."""
    exe = os.path.join(ROOT, "build", "fqntrace_exporter_bench")
    if not os.path.exists(exe):
        log("P4 skipped: build/fqntrace_exporter_bench was not built (needs libbenchmark-dev)")
        return {"skipped": "build/fqntrace_exporter_bench not built (Google Benchmark missing)"}
    with tempfile.TemporaryDirectory(prefix="fqntrace-p4-") as tmp:
        out_json = os.path.join(tmp, "gbench.json")
        cmd = [exe, f"--benchmark_repetitions={s['p4_repetitions']}",
               f"--benchmark_min_time={s['p4_min_time']}",
               "--benchmark_enable_random_interleaving=true",
               f"--benchmark_out={out_json}", "--benchmark_out_format=json"]
        log(f"P4: {' '.join(os.path.relpath(c, ROOT) if c == exe else c for c in cmd[:4])}")
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{exe} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out_json) as f:
            gb = json.load(f)
    formats = {}
    for b in gb["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        fmt = b["run_name"].split("/", 1)[1]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        d = formats.setdefault(fmt, {"cpu_events_per_s": [], "wall_events_per_s": []})
        d["cpu_events_per_s"].append(b["events_per_s"])
        d["wall_events_per_s"].append(b["events_per_iteration"] / (b["real_time"] * scale))
        for key in ("bytes_per_event", "json_objects_per_event", "events_per_step",
                    "file_bytes_16_steps"):
            if key in b:
                d[key] = b[key]
    for fmt, d in formats.items():
        d["cpu_events_per_s_median"] = median(d["cpu_events_per_s"])
        d["cpu_events_per_s_iqr"] = quartiles(d["cpu_events_per_s"])
        d["wall_events_per_s_median"] = median(d["wall_events_per_s"])
        d["ns_per_event_cpu"] = 1e9 / d["cpu_events_per_s_median"]
    callgrind = {}
    if shutil.which("valgrind"):
        from concurrent.futures import ThreadPoolExecutor

        fmts = ("chrome", "jsonl")
        with ThreadPoolExecutor(2) as pool:
            done = pool.map(lambda fm: callgrind_exporter(exe, fm, s["p4_callgrind_events"]), fmts)
            callgrind = dict(zip(fmts, done))
    breakdown = chrome_bytes(exe)
    chrome = formats.get("chrome", {})
    rate = chrome.get("cpu_events_per_s_median")
    bpe = chrome.get("bytes_per_event")
    # gzip formats have their own target: their cost relative to the plain format.
    slowest = min((d["cpu_events_per_s_median"] for f, d in formats.items()
                   if f != "all" and not f.endswith("_gz")), default=None)
    gz, plain = formats.get("chrome_gz", {}), formats.get("chrome", {})
    gz_ratio = (gz["ns_per_event_cpu"] / plain["ns_per_event_cpu"]
                if "ns_per_event_cpu" in gz and "ns_per_event_cpu" in plain else None)
    gz_bpe = gz.get("bytes_per_event")
    return {"binary": "build/fqntrace_exporter_bench", "repetitions": s["p4_repetitions"],
            "min_time_s": s["p4_min_time"], "context": gb.get("context", {}), "formats": formats,
            "callgrind": callgrind, "chrome_bytes": breakdown,
            "targets": {"events_per_s": {"target": ">= 2,000,000 events/s on one core (every format)",
                                         "value": slowest,
                                         "met": None if slowest is None else slowest >= 2e6},
                        "chrome_bytes_per_event": {"target": "<= 200", "value": bpe,
                                                   "met": None if bpe is None else bpe <= 200},
                        "chrome_events_per_s": rate,
                        "gzip_drain_cost_ratio": {"target": "<= 1.5 (chrome_gz ÷ chrome, CPU ns per event)",
                                                  "value": gz_ratio,
                                                  "met": None if gz_ratio is None else gz_ratio <= 1.5},
                        "gzip_bytes_per_event": {"target": "(mix; <= 30 per op event on the demo)",
                                                 "value": gz_bpe}}}


NUMBER = re.compile(r'(?<=:)-?[0-9]+(?:\.[0-9]+)?(?=[,}])')


def chrome_bytes(exe, events=7150):
    """Where a Chrome event's bytes go: a file of the benchmark's events (its --plain mode), split
    into strings (names, fqns, types, the cat and phase values), numbers and the rest (keys,
    quotes, punctuation, separators). Per raw event; flow objects are counted apart."""
    with tempfile.TemporaryDirectory(prefix="fqntrace-p4b-") as tmp:
        path = os.path.join(tmp, "mix.json")
        subprocess.run([exe, "--plain", "chrome", str(events), path], check=True, capture_output=True)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    x = {"events": 0, "bytes": 0, "strings": 0, "numbers": 0}
    flow = {"objects": 0, "bytes": 0}
    for line in lines:
        if not line.startswith('{"ph":"X"') and not line.startswith('{"ph":"s"') \
                and not line.startswith('{"ph":"f"'):
            continue
        size = len(line.encode()) + 1  # and its newline (the comma is inside the line)
        e = json.loads(line.rstrip(","))
        if e["ph"] != "X":
            flow["objects"] += 1
            flow["bytes"] += size
            continue
        x["events"] += 1
        x["bytes"] += size
        strings = [e["name"], e["cat"], e["args"]["fqn"], e["args"]["phase"],
                   e["args"].get("module_type"), e["args"].get("collective")]
        x["strings"] += sum(len(json.dumps(v, ensure_ascii=False).encode()) for v in strings if v is not None)
        x["numbers"] += sum(len(v) for v in NUMBER.findall(line))
    n = x["events"]
    if not n:
        return None
    return {"x_events": n, "bytes_per_x_event": x["bytes"] / n, "strings_per_x_event": x["strings"] / n,
            "numbers_per_x_event": x["numbers"] / n,
            "syntax_per_x_event": (x["bytes"] - x["strings"] - x["numbers"]) / n,
            "flow_objects_per_x_event": flow["objects"] / n,
            "flow_bytes_per_x_event": flow["bytes"] / n,
            "bytes_per_flow_object": flow["bytes"] / flow["objects"] if flow["objects"] else None}


def callgrind_exporter(exe, fmt, events):
    """Instructions per event inside the drain (MixPipeline::drain, which the Drainer and the
    exporters run under), for exactly `events` events (whole steps, so slightly more)."""
    with tempfile.TemporaryDirectory(prefix="fqntrace-p4cg-") as tmp:
        out_file = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
               "--toggle-collect=*MixPipeline::drain*", exe, "--plain", fmt, str(events)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            log(f"P4 callgrind {fmt} failed: {proc.stderr[-1500:]}")
            return None
        done = json.loads(proc.stdout.strip().splitlines()[-1])
        total = None
        with open(out_file) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
        return {"events": done["events"], "instructions": total,
                "instructions_per_event": total / done["events"] if total else None}



def run_json(cmd, out_json, timeout=1800):
    """Runs a bench script that writes its numbers to `out_json`; returns them (None on failure)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    if proc.returncode != 0:
        log(f"{os.path.relpath(cmd[1], ROOT)} failed (skipped):\n{proc.stderr[-2000:]}")
        return None
    with open(out_json) as f:
        return json.load(f)


def demo_bytes(tmpdir):
    """P4b: Chrome bytes per op event of scripts/demo.sh's run (FLOPs on, as the demo)."""
    path = os.path.join(tmpdir, "demo.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(FQNTRACE=path, FQNTRACE_FLOPS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([PY, "-m", "fqntrace.demo"], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=900)
    if proc.returncode != 0:
        log(f"demo failed (P4b skipped):\n{proc.stderr[-2000:]}")
        return None
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    size = os.path.getsize(path)
    return {"bytes": size, "cpu_op_events": ops, "bytes_per_op_event": size / ops,
            "objects": len(events)}


def run_drain(s, tmpdir):
    """P7: drain CPU per op event from outside (bench/drain_cpu.py), drops under load per drain
    nice value (bench/drain_nice.py), and P4b: the demo's bytes per op event."""
    out = {}
    j = os.path.join(tmpdir, "p7.json")
    log(f"P7: drain CPU per op event, {s['p7_runs']} processes x {s['p7_ops']:,} ops")
    out["cpu"] = run_json([PY, os.path.join(HERE, "drain_cpu.py"), "--ops", str(s["p7_ops"]),
                           "--runs", str(s["p7_runs"]), "--json", j], j)
    j = os.path.join(tmpdir, "p7gz.json")
    log(f"P7: the same with FQNTRACE=….json.gz, {s['p7_runs']} processes")
    out["cpu_gz"] = run_json([PY, os.path.join(HERE, "drain_cpu.py"), "--ops", str(s["p7_ops"]),
                              "--runs", str(s["p7_runs"]), "--suffix", ".json.gz", "--json", j], j)
    # The same ratio on a training loop (forward, backward with module spans, SGD): its steps
    # are longer than deflate's 32 KiB window, so cached line heads repeat from farther back.
    for key, suffix in (("train_cpu", ".json"), ("train_cpu_gz", ".json.gz")):
        j = os.path.join(tmpdir, f"p7{key}.json")
        log(f"P7: training loop, {suffix}, {s['p7_runs']} processes x {s['p7_train_steps']} steps")
        out[key] = run_json([PY, os.path.join(HERE, "drain_cpu.py"), "--workload", "train", "--ops",
                             str(s["p7_train_steps"]), "--runs", str(s["p7_runs"]), "--suffix", suffix,
                             "--json", j], j)
    j = os.path.join(tmpdir, "nice.json")
    log(f"P7: drops under load, drain nice {s['p7_nice']}, {s['p7_nice_ops']:,} ops each")
    out["nice"] = run_json([PY, os.path.join(HERE, "drain_nice.py"), "--ops", str(s["p7_nice_ops"]),
                            "--nice", *map(str, s["p7_nice"]), "--json", j], j)
    log("P4b: the demo's bytes per op event")
    out["demo"] = demo_bytes(tmpdir)
    cpu, cpu_gz = out["cpu"] or {}, out["cpu_gz"] or {}
    train, train_gz = out["train_cpu"] or {}, out["train_cpu_gz"] or {}

    def gzip_ratio(plain, gz):
        return (gz["drain_ns_per_op"] / plain["drain_ns_per_op"]
                if plain.get("drain_ns_per_op") and gz.get("drain_ns_per_op") else None)
    ratio, train_ratio = gzip_ratio(cpu, cpu_gz), gzip_ratio(train, train_gz)
    out["targets"] = {
        "gzip_ratio": {"value": ratio, "target": "<= 1.5x", "met": None if ratio is None else ratio <= 1.5,
                       "gzip_ns": cpu_gz.get("drain_ns_per_op"), "gzip_bytes_per_op": cpu_gz.get("bytes_per_op")},
        "gzip_train_ratio": {"value": train_ratio, "target": "<= 1.5x",
                             "met": None if train_ratio is None else train_ratio <= 1.5,
                             "plain_ns": train.get("drain_ns_per_op"), "gzip_ns": train_gz.get("drain_ns_per_op")},
        "drain_ns": {"value": cpu.get("drain_ns_per_op"), "target": "<= 100 ns",
                     "met": None if cpu.get("drain_ns_per_op") is None else cpu["drain_ns_per_op"] <= 100},
        "demo_bytes": {"value": (out["demo"] or {}).get("bytes_per_op_event"), "target": "<= 150",
                       "met": None if not out["demo"] else out["demo"]["bytes_per_op_event"] <= 150}}
    return out


def run_ddp(s, tmpdir):
    """P8: DDP on 2 ranks, in-process A/B (bench/distributed/measure.py --ab-blocks), several jobs."""
    runs = []
    for i in range(s["p8_runs"]):
        j = os.path.join(tmpdir, f"ddp{i}.json")
        r = run_json([PY, os.path.join(HERE, "distributed", "measure.py"), "--skip-overhead",
                      "--skip-comm", "--ab-blocks", str(s["p8_blocks"]), "--out",
                      os.path.join(tmpdir, f"ddp{i}"), "--json", j], j, timeout=900)
        if r:
            runs.append(r)
    if not runs:
        return None
    overheads = [r["overhead"] for r in runs]
    groups = [g for r in runs for g in r["group_overheads"]]
    value = median(overheads)
    return {"runs": runs, "blocks": s["p8_blocks"], "overhead_median": value,
            "overhead_iqr": quartiles(overheads), "group_median": median(groups),
            "group_iqr": quartiles(groups), "groups": len(groups),
            "untraced_ms_median": median([r["untraced_ms"] for r in runs]),
            "traced_ms_median": median([r["traced_ms"] for r in runs]),
            "target": {"value": value, "target": "<= 3 %", "met": value <= 0.03}}


def rss_summary(rss, warmup_fraction=0.1):
    """Growth after warm-up (the first 10% of ops, at least 2 s), and whether it is flat."""
    points = rss["points"]
    total = points[-1][1]
    cut = next((i for i, (t, n, _) in enumerate(points) if n >= warmup_fraction * total and t >= 2.0),
               len(points) - 1)
    after = points[cut:]
    ref = after[0][2]
    growth_kb = max(p[2] for p in after) - ref
    half = len(after) // 2
    first_max = max(p[2] for p in after[:half]) if half else ref
    second_max = max(p[2] for p in after[half:])
    slope = None
    if len(after) >= 3:
        xs = [p[1] / 1e6 for p in after]
        ys = [p[2] / 1024 for p in after]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None
    return {"ops": total, "seconds": points[-1][0], "warmup_end_s": after[0][0],
            "rss_start_mb": points[0][2] / 1024, "rss_after_warmup_mb": ref / 1024,
            "max_growth_after_warmup_mb": growth_kb / 1024,
            "growth_from_start_mb": (max(p[2] for p in points) - points[0][2]) / 1024,
            "second_half_growth_mb": (second_max - first_max) / 1024,
            "slope_mb_per_million_ops": slope,
            "flat": (second_max - first_max) <= 1024 and (slope is None or abs(slope) < 0.5),
            "ops_per_second": total / points[-1][0] if points[-1][0] else None}


def run_p5(runner, s):
    log(f"P5: fqntrace, up to {s['p5_ops']:,} ops or {s['p5_budget']:.0f} s")
    fq = runner.run("fqntrace", "rss", ["--ops", s["p5_ops"], "--budget", s["p5_budget"],
                                        "--interval", 0.5, "--threads", 1])
    log(f"P5: baseline, {s['p5_baseline_ops']:,} ops")
    base = runner.run("baseline", "rss", ["--ops", s["p5_baseline_ops"], "--budget", 60,
                                          "--interval", 0.5, "--threads", 1])
    log(f"P5: torch.profiler, {s['p5_profiler_ops']:,} ops")
    prof = runner.run("profiler", "rss", ["--ops", s["p5_profiler_ops"], "--budget", 60,
                                          "--interval", 0.5, "--threads", 1])
    tf = fq["trace_file"]
    footer = tf["footer"]
    fq_sum = rss_summary(fq["rss"])
    fq_sum.update({
        "stopped_by_budget": fq["rss"]["stopped_by_budget"],
        "trace_bytes": tf["bytes"], "trace_lines": tf["lines"], "trace_event_lines": tf["event_lines"],
        "footer_x_events": footer.get("events"), "dropped_events": footer.get("dropped_events"),
        "complete": footer.get("complete"),
        "bytes_per_event": tf["bytes"] / tf["event_lines"] if tf["event_lines"] else None,
        "target": "<= 32 MB and flat"})
    fq_sum["met"] = fq_sum["max_growth_after_warmup_mb"] <= 32 and fq_sum["flat"]
    pr = prof["rss"]
    p_points = pr["points"]
    p_ops = p_points[-1][1]
    during_mb = (p_points[-1][2] - p_points[0][2]) / 1024
    prof_sum = {"ops": p_ops, "seconds": p_points[-1][0], "growth_during_mb": during_mb,
                "mb_per_million_ops": during_mb / (p_ops / 1e6),
                "rss_after_exit_growth_mb": (pr["rss_after_exit_kb"] - p_points[0][2]) / 1024,
                "mb_per_million_ops_after_exit": (pr["rss_after_exit_kb"] - p_points[0][2]) / 1024
                / (p_ops / 1e6), "exit_seconds": pr["exit_seconds"]}
    return {"fqntrace": fq_sum, "baseline": rss_summary(base["rss"]), "profiler": prof_sum,
            "raw": {"fqntrace": fq["rss"], "baseline": base["rss"], "profiler": pr}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and ops (a smoke run)")
    parser.add_argument("--only", default=None,
                        help="comma-separated subset of p1,p2,p3,p4,p5,memory,drain,ddp,callgrind "
                             "(default: all; --quick skips callgrind). A subset keeps the other "
                             "parts' numbers from the existing results file")
    parser.add_argument("--results", default=os.path.join(HERE, "results.json"))
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    args = parser.parse_args()
    kind = "quick" if args.quick else "full"
    s = SETTINGS[kind]
    only = set((args.only or ("p1,p2,p3,p4,p5,memory,drain,ddp" if args.quick
                              else "p1,p2,p3,p4,p5,memory,drain,ddp,callgrind")).split(","))
    started = time.time()
    results = {"kind": kind, "settings": s,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": machine(), "torch": torch_version(), "git_commit": git_commit(),
               "python": PY}
    tmpdir = tempfile.mkdtemp(prefix="fqntrace-bench-")
    try:
        runner = Runner(tmpdir)
        if "p1" in only:
            log(f"P1/P6: {s['p1_rounds']} rounds x {len(P1_MODES)} modes")
            p1 = run_p1(runner, s)
            p1["summary"] = summarize_p1(p1)
            results["p1"] = p1
        if "p2" in only:
            log(f"P2: {s['p2_rounds']} rounds x {len(P2_MODES)} modes, {P2_THREADS} thread")
            results["p2"] = run_p2(runner, s)
            log(f"P2 A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} alternating blocks")
            results["p2"]["ab"] = run_p2_ab(runner, s)
            log(f"P2 compiled A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} blocks")
            results["p2"]["compiled_ab"] = run_p2_ab(runner, s, compiled=True)
        if "p3" in only:
            log(f"P3: {s['p3_processes']} process(es) x {s['p3_rounds']} rounds x {len(TRACKER_NAMES)} "
                f"tracker variants, {s['p3_modules']} modules")
            results["p3"] = run_p3(runner, s)
        if "p4" in only:
            results["p4"] = run_p4(s)
        if "p5" in only:
            results["p5"] = run_p5(runner, s)
        if "memory" in only:
            log("memory: FQNTRACE_MEMORY against torch.profiler's profile_memory")
            env = dict(os.environ, FQNTRACE_BENCH_QUICK="1" if args.quick else "0")
            out = subprocess.run([PY, os.path.join(HERE, "memory", "cost.py")], capture_output=True,
                                 text=True, cwd=ROOT, timeout=1800, env=env)
            if out.returncode == 0:
                results["memory"] = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                log(f"memory failed (skipped):\n{out.stderr[-2000:]}")
        if "drain" in only:
            results["drain"] = run_drain(s, tmpdir)
        if "ddp" in only:
            log(f"P8: DDP 2 ranks, in-process A/B, {s['p8_runs']} jobs x {s['p8_blocks']} blocks")
            results["ddp"] = run_ddp(s, tmpdir)
        if "callgrind" in only:
            log(f"callgrind: instructions per op, {s['callgrind_ops']:,} ops per mode")
            out = subprocess.run([PY, os.path.join(HERE, "callgrind_ops.py"), "--ops",
                                  str(s["callgrind_ops"]), "--mlp-steps", str(s["callgrind_mlp_steps"]),
                                  "--jobs", "2", "--whole", "--ddp-steps", str(s["callgrind_ddp_steps"])],
                                 capture_output=True,
                                 text=True, cwd=ROOT, timeout=2400)
            if out.returncode == 0:
                results["callgrind"] = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                log(f"callgrind failed (skipped):\n{out.stderr[-2000:]}")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    seconds = time.time() - started
    if args.only and os.path.exists(args.results):
        # A partial run replaces only what it measured; the full run's facts (date, commit,
        # machine, duration) stay, and the partial run is listed with its own.
        with open(args.results) as f:
            merged = json.load(f)
        merged.update({part: value for part, value in results.items() if part in only})
        merged.setdefault("partial", []).append({
            "date": results["date"], "only": sorted(only), "git_commit": results["git_commit"],
            "loadavg": [results["machine"]["loadavg_start"], list(os.getloadavg())],
            "seconds": seconds})
        results = merged
    else:
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["seconds"] = seconds
        results["processes"] = runner.count
    with open(args.results, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    log(f"wrote {os.path.relpath(args.results, ROOT)} ({seconds:.0f} s, "
        f"{runner.count} processes)")
    sys.path.insert(0, HERE)
    import report

    # Only the generated sections change; the hand-written analysis around them stays.
    with open(args.doc) as f:
        text = report.update(f.read(), results)
    with open(args.doc, "w") as f:
        f.write(text)
    log(f"updated the generated sections of {os.path.relpath(args.doc, ROOT)}")
    print(report.table(results))


if __name__ == "__main__":
    main()
