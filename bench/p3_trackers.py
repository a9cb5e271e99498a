"""P3, fqntrace.ModTracker and ModuleTracker against torch's, on a module-heavy model: the
variants alternate inside each process (bench/run_mode.py's trackers), a few processes."""

from modes import TRACKER_NAMES
from runner import log, median, quartiles, ratio, target

SETTINGS = {
    "full": {"p3_processes": 2, "p3_rounds": 30, "p3_steps": 4, "p3_modules": 200},
    "quick": {"p3_processes": 1, "p3_rounds": 10, "p3_steps": 4, "p3_modules": 200},
}


def run_p3(runner, s):
    """P3: fqntrace.ModTracker vs torch's ModTracker on a module-heavy model. The trackers are
    context managers, so their variants alternate inside each process (bench/run_mode.py
    bench_trackers); a few processes, so one unlucky process cannot decide the result."""
    log(
        f"P3: {s['p3_processes']} process(es) x {s['p3_rounds']} rounds x {len(TRACKER_NAMES)} "
        f"tracker variants, {s['p3_modules']} modules"
    )
    args = f"--modules {s['p3_modules']} --rounds {s['p3_rounds']} --steps {s['p3_steps']}"
    args = f"{args} --warmup 1 --threads 1".split()
    raw, cpu, per_process = {v: [] for v in TRACKER_NAMES}, {v: [] for v in TRACKER_NAMES}, []
    for i in range(s["p3_processes"]):
        out = runner.run("baseline", "trackers", args)["trackers"]
        for v in TRACKER_NAMES:
            raw[v] += out["samples"][v]
            cpu[v] += out["thread_cpu_samples"][v]
        b = median(out["samples"]["none"])
        added = {v: median(out["samples"][v]) - b for v in TRACKER_NAMES}
        per_process.append({"none_ms": b, "added_ms": added})
        log(
            f"P3 process {i + 1}/{s['p3_processes']}: no tracker {b:.2f} ms/step, torch ModTracker "
            f"+{added['torch_modtracker']:.2f}, fqntrace.ModTracker +{added['fqntrace_modtracker']:.2f}"
        )
    return {
        "model": f"nn.Sequential of {s['p3_modules']} nn.Linear(8, 8), batch 4, "
        "forward + sum().backward() inside `with tracker:`",
        "modules": s["p3_modules"],
        "processes": s["p3_processes"],
        "rounds": s["p3_rounds"],
        "steps_per_sample": s["p3_steps"],
        "threads": 1,
        "variants": list(TRACKER_NAMES),
        "raw": raw,
        "raw_thread_cpu": cpu,
        "per_process": per_process,
        "summary": summarize_p3(raw, cpu, s["p3_processes"]),
    }


def summarize_p3(raw, cpu, processes):
    """Medians over all rounds of all processes; added = variant − no tracker. The ratio of the
    two ModTrackers' added times is also taken per round (each round's samples ran seconds apart
    in one process), median and IQR of those."""
    n = len(raw["none"])
    out = {"variants": {}, "rounds_total": n}
    base, base_cpu, base_best = median(raw["none"]), median(cpu["none"]), min(raw["none"])
    for v in TRACKER_NAMES:
        ms, iqr, cpu_ms, best = median(raw[v]), quartiles(raw[v]), median(cpu[v]), min(raw[v])
        out["variants"][v] = dict(ms_per_step=ms, iqr_ms=iqr, added_ms=ms - base)
        out["variants"][v].update(thread_cpu_ms=cpu_ms, thread_cpu_added_ms=cpu_ms - base_cpu)
        out["variants"][v].update(best_ms=best, best_added_ms=best - base_best)
    var = out["variants"]

    def per_round(ours, theirs, data):
        vals = [ratio(o - b, t - b) for o, t, b in zip(data[ours], data[theirs], data["none"])]
        return [x for x in vals if x is not None]

    for pair, (ours, theirs) in {
        "modtracker": ("fqntrace_modtracker", "torch_modtracker"),
        "moduletracker": ("fqntrace_moduletracker", "torch_moduletracker"),
    }.items():
        rounds = per_round(ours, theirs, raw)
        out[pair] = {
            "ratio": ratio(var[ours]["added_ms"], var[theirs]["added_ms"]),
            "ratio_thread_cpu": ratio(
                var[ours]["thread_cpu_added_ms"], var[theirs]["thread_cpu_added_ms"]
            ),
            "ratio_best": ratio(var[ours]["best_added_ms"], var[theirs]["best_added_ms"]),
            "ratio_per_round_median": median(rounds),
            "ratio_per_round_iqr": quartiles(rounds),
        }
    out["target"] = target("<= 0.5x", out["modtracker"]["ratio"], 0.5)
    return out


def run(runner, quick):
    return run_p3(runner, SETTINGS["quick" if quick else "full"])
