"""P1, per op and a small MLP step, and P6 (the library loaded, FQNTRACE unset): every mode
(bench/modes.py) in its own process (bench/run_mode.py), one per mode per round, the order
rotating each round; medians over rounds."""

import time

from modes import P1_MODES
from runner import log, median, quartiles, ratio, rotated, target

SETTINGS = {
    "full": {"p1_rounds": 8, "p1_ops": 20000, "p1_samples": 9, "mlp_steps": 50},
    "quick": {"p1_rounds": 3, "p1_ops": 20000, "p1_samples": 5, "mlp_steps": 30},
}

# summary["ratios"]: what a mode adds over what a reference adds, by name: name, benchmark, key,
# mode, reference. The best samples and the loop thread's CPU are secondary views, less sensitive
# to noise bursts.
RATIOS = [
    line.split()
    for line in """
fqntrace_over_empty_added_ns ops added_ns fqntrace empty
fqntrace_over_profiler_added_ns ops added_ns fqntrace profiler
fqntrace_flops_over_empty_added_ns ops added_ns fqntrace_flops empty
mlp_fqntrace_over_empty_slowdown mlp slowdown_pct fqntrace empty
mlp_fqntrace_nohooks_over_empty_slowdown mlp slowdown_pct fqntrace_nohooks empty
best_fqntrace_over_empty_added_ns ops best_added_ns fqntrace empty
best_fqntrace_over_profiler_added_ns ops best_added_ns fqntrace profiler
thread_cpu_fqntrace_over_empty_added_ns ops thread_cpu_added_ns fqntrace empty
best_mlp_fqntrace_over_empty_slowdown mlp best_slowdown_pct fqntrace empty""".strip().splitlines()
]


def run_p1(runner, s):
    """P1 (per-op, MLP) and P6 (loaded_off): one process per mode per round."""
    raw = {m: {"ops": [], "mlp": []} for m in P1_MODES}
    facts = {}
    args = f"--ops {s['p1_ops']} --samples {s['p1_samples']} --steps {s['mlp_steps']}"
    args = f"{args} --warmup 1 --threads 1".split()
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
                dropped = out["trace_file"]["footer"].get("dropped_events")
                facts[mode]["dropped_events_last_round"] = dropped
        base, fq, em = (median(raw[m]["ops"][-1]) for m in ("baseline", "fqntrace", "empty"))
        log(
            f"P1 round {r + 1}/{s['p1_rounds']} ({time.time() - t0:.0f} s): baseline {base:.0f} "
            f"ns/op, empty +{em - base:.0f}, fqntrace +{fq - base:.0f}"
        )
    p1 = {"modes": list(P1_MODES), "rounds": s["p1_rounds"], "ops_per_sample": s["p1_ops"]}
    p1.update(samples_per_process=s["p1_samples"], mlp_steps_per_sample=s["mlp_steps"])
    return {**p1, "threads": 1, "raw": raw, "raw_facts": facts}


# The facts P6 keeps of its mode's run (bench/run_mode.py's set_up).
P6_FACTS = ("running", "global_callbacks", "function_scope_active")


def lowest(samples):
    """The lowest sample of all processes."""
    return min(min(x) for x in samples)


def median_of_medians(samples):
    """The median over processes of each process's median."""
    return median([median(x) for x in samples])


def summarize_p1(p1):
    """Medians over rounds of each process's median, per mode; added = mode − baseline of those.

    Not paired per round: on this machine noise comes in bursts that hit single processes, and a
    paired difference is spoiled when either of its two processes is hit, while a median over
    rounds per mode shrugs off a minority of hit processes. The per-round spread is kept (IQR)."""
    raw, modes = p1["raw"], p1["modes"]
    per_round = {b: {m: [median(x) for x in raw[m][b]] for m in modes} for b in ("ops", "mlp")}
    summary = {"ops": {}, "mlp": {}}
    base_ops, base_mlp = (median(per_round[b]["baseline"]) for b in ("ops", "mlp"))
    base_best, base_best_mlp = (lowest(raw["baseline"][b]) for b in ("ops", "mlp"))
    base_thread = median_of_medians(raw["baseline"]["ops_thread_cpu"])
    for m in modes:
        ops, mlp = per_round["ops"][m], per_round["mlp"][m]
        best, thread_cpu = lowest(raw[m]["ops"]), median_of_medians(raw[m]["ops_thread_cpu"])
        o = summary["ops"][m] = {"ns_per_op": median(ops), "added_ns": median(ops) - base_ops}
        o.update(iqr_ns=quartiles(ops), per_round=ops, thread_cpu_ns=thread_cpu)
        o["thread_cpu_added_ns"] = thread_cpu - base_thread
        o["process_cpu_ns"] = median_of_medians(raw[m]["ops_process_cpu"])
        o.update(best_ns=best, best_added_ns=best - base_best)
        slowdown, best_us = 100.0 * (median(mlp) / base_mlp - 1.0), lowest(raw[m]["mlp"])
        step = summary["mlp"][m] = {"us_per_step": median(mlp), "slowdown_pct": slowdown}
        step.update(iqr_us=quartiles(mlp), per_round=mlp, best_us=best_us)
        step["best_slowdown_pct"] = 100.0 * (best_us / base_best_mlp - 1.0)
    r = summary["ratios"] = {
        name: ratio(summary[b][mode][key], summary[b][ref][key])
        for name, b, key, mode, ref in RATIOS
    }
    summary["targets"] = {
        "ops_vs_empty": target("<= 1.5x", r["fqntrace_over_empty_added_ns"], 1.5),
        "ops_vs_profiler": target("<= 0.5x", r["fqntrace_over_profiler_added_ns"], 0.5),
        "mlp_vs_empty": target("<= 1.5x", r["mlp_fqntrace_over_empty_slowdown"], 1.5),
    }
    # P6: libfqntrace.so loaded, FQNTRACE unset. Noise: the larger of 1 % and the baseline's IQR
    # over rounds; "within" when the difference of medians is inside it.
    base_iqr = quartiles(per_round["ops"]["baseline"])
    noise = max(0.01 * base_ops, base_iqr[1] - base_iqr[0])
    facts, off = p1["raw_facts"].get("loaded_off", {}), summary["ops"]["loaded_off"]
    p6 = summary["p6"] = {k: facts.get(k) for k in P6_FACTS}
    p6.update(added_ns=off["added_ns"], best_added_ns=off["best_added_ns"], noise_ns=noise)
    p6["within_noise"] = abs(off["added_ns"]) <= noise
    p6["mlp_slowdown_pct"] = summary["mlp"]["loaded_off"]["slowdown_pct"]
    return summary


def run(runner, quick):
    s = SETTINGS["quick" if quick else "full"]
    log(f"P1/P6: {s['p1_rounds']} rounds x {len(P1_MODES)} modes")
    p1 = run_p1(runner, s)
    p1["summary"] = summarize_p1(p1)
    return p1
