"""P4, the exporters' throughput: the main build's fqntrace_exporter_bench (Google Benchmark)
drains a transformer step's events through the session's Drainer into each exporter; wall and
CPU time per event, instructions per event (callgrind)."""

import json
import os
import shutil
import subprocess
import tempfile

from runner import BUILD, ROOT, log, median, quartiles, target

SETTINGS = {
    "full": {"p4_repetitions": 7, "p4_min_time": 0.3, "p4_callgrind_events": 50000},
    "quick": {"p4_repetitions": 3, "p4_min_time": 0.2, "p4_callgrind_events": 30000},
}


# What the benchmark reports beside its times, per format.
COUNTERS = "bytes_per_event json_objects_per_event events_per_step file_bytes_16_steps".split()


def run_p4(s):
    """P4: exporter throughput, C++ (Google Benchmark): build/fqntrace_exporter_bench. Wall and
    CPU time from Google Benchmark (repetitions interleaved at random), instructions per event
    from callgrind (bench binary's --plain mode, counting inside the drain only)."""
    exe = os.path.join(BUILD, "fqntrace_exporter_bench")
    if not os.path.exists(exe):
        log(f"P4 skipped: {exe} was not built (needs libbenchmark-dev)")
        return None
    with tempfile.TemporaryDirectory(prefix="fqntrace-p4-") as tmp:
        out_json = os.path.join(tmp, "gbench.json")
        cmd = [exe, f"--benchmark_repetitions={s['p4_repetitions']}"]
        cmd += f"--benchmark_min_time={s['p4_min_time']} --benchmark_out={out_json}".split()
        cmd += ["--benchmark_enable_random_interleaving=true", "--benchmark_out_format=json"]
        log(f"P4: {' '.join(os.path.relpath(c, ROOT) if c == exe else c for c in cmd[:4])}")
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{exe} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out_json) as f:
            gb = json.load(f)
    formats = {}
    for b in (b for b in gb["benchmarks"] if b.get("run_type") == "iteration"):
        fmt = b["run_name"].split("/", 1)[1]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        d = formats.setdefault(fmt, {"raw_cpu_events_per_s": [], "raw_wall_events_per_s": []})
        d["raw_cpu_events_per_s"].append(b["events_per_s"])
        d["raw_wall_events_per_s"].append(b["events_per_iteration"] / (b["real_time"] * scale))
        d.update({k: b[k] for k in COUNTERS if k in b})
    for fmt, d in formats.items():
        d["cpu_events_per_s_median"] = median(d["raw_cpu_events_per_s"])
        d["cpu_events_per_s_iqr"] = quartiles(d["raw_cpu_events_per_s"])
        d["wall_events_per_s_median"] = median(d["raw_wall_events_per_s"])
        d["ns_per_event_cpu"] = 1e9 / d["cpu_events_per_s_median"]
    callgrind = {}
    if shutil.which("valgrind"):
        from concurrent.futures import ThreadPoolExecutor

        fmts = ("chrome", "jsonl")
        with ThreadPoolExecutor(2) as pool:
            done = pool.map(lambda fm: callgrind_exporter(exe, fm, s["p4_callgrind_events"]), fmts)
            callgrind = dict(zip(fmts, done))
    gz, plain = formats.get("chrome_gz", {}), formats.get("chrome", {})
    # gzip formats have their own target: their cost relative to the plain format.
    plains = (d for fmt, d in formats.items() if fmt != "all" and not fmt.endswith("_gz"))
    slowest = min((d["cpu_events_per_s_median"] for d in plains), default=None)
    gz_ratio = None
    if "ns_per_event_cpu" in gz and "ns_per_event_cpu" in plain:
        gz_ratio = gz["ns_per_event_cpu"] / plain["ns_per_event_cpu"]
    return {
        "binary": "build/fqntrace_exporter_bench",
        "repetitions": s["p4_repetitions"],
        "min_time_s": s["p4_min_time"],
        "raw_context": gb.get("context", {}),
        "context": {k: gb.get("context", {}).get(k) for k in ("num_cpus", "mhz_per_cpu")},
        "formats": formats,
        "callgrind": callgrind,
        "targets": {
            "events_per_s": target(
                ">= 2,000,000 events/s on one core (every format)", slowest, 2e6, at_least=True
            ),
            "chrome_bytes_per_event": target("<= 200", plain.get("bytes_per_event"), 200),
            "chrome_events_per_s": plain.get("cpu_events_per_s_median"),
            "gzip_drain_cost_ratio": target(
                "<= 1.5 (chrome_gz ÷ chrome, CPU ns per event)", gz_ratio, 1.5
            ),
            "gzip_bytes_per_event": {
                "target": "(mix; <= 30 per op event on the demo)",
                "value": gz.get("bytes_per_event"),
            },
        },
    }


def callgrind_exporter(exe, fmt, events):
    """Instructions per event inside the drain (MixPipeline::drain, which the Drainer and the
    exporters run under), for exactly `events` events (whole steps, so slightly more)."""
    with tempfile.TemporaryDirectory(prefix="fqntrace-p4cg-") as tmp:
        out_file = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"]
        cmd += ["--toggle-collect=*MixPipeline::drain*", exe, "--plain", fmt, str(events)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            log(f"P4 callgrind {fmt} failed: {proc.stderr[-1500:]}")
            return None
        events = json.loads(proc.stdout.strip().splitlines()[-1])["events"]
        with open(out_file) as f:  # the total: the last summary: or totals: line
            totals = [line for line in f if line.startswith(("summary:", "totals:"))]
        total = int(totals[-1].split()[1]) if totals else None
        per_event = total / events if total else None
        return {"events": events, "instructions": total, "instructions_per_event": per_event}


def run(runner, quick):
    return run_p4(SETTINGS["quick" if quick else "full"])
