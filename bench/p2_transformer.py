"""P2, a transformer training step (fqntrace.demo.TinyTransformer, AdamW): in-process A/B
(bench/ab.py through bench/run_mode.py's transformer_ab), traced and untraced blocks alternating
inside each process, eager and under torch.compile. (Traced and untraced in separate processes,
once here too, measured the same with more noise: docs/history/benchmarks-2026-12.md.)"""

import ab
from runner import log, median, quartiles

SETTINGS = {
    "full": {"p2_warmup": 2, "p2ab_processes": 2, "p2ab_blocks": 24, "p2ab_steps": 2},
    "quick": {"p2_warmup": 2, "p2ab_processes": 1, "p2ab_blocks": 8, "p2ab_steps": 2},
}
P2_THREADS, P2_BATCH = 1, 8
MODEL = "fqntrace.demo.TinyTransformer(vocab=512, dim=256, heads=4, layers=4, seq=128)"


def run_p2_ab(runner, s, compiled=False):
    """Traced and untraced blocks alternating inside each process (fqntrace.profile);
    `compiled`: the model under torch.compile (inductor)."""
    per_process, quads = [], []
    pooled = {"baseline": [], "fqntrace": []}
    args = f"--blocks {s['p2ab_blocks']} --steps {s['p2ab_steps']} --warmup {s['p2_warmup']} "
    args += f"--threads {P2_THREADS} --batch {P2_BATCH}" + (" --compile" if compiled else "")
    for i in range(s["p2ab_processes"]):
        out = runner.run("baseline", "transformer_ab", args.split())["transformer_ab"]
        b, f = median(out["samples"]["baseline"]), median(out["samples"]["fqntrace"])
        quads += ab.group_changes(out["blocks"])
        process = {"baseline_ms": b, "fqntrace_ms": f, "slowdown_pct": 100.0 * (f / b - 1.0)}
        process.update(raw_blocks=out["blocks"], traced_event_lines=out["traced_event_lines"])
        per_process.append(process)
        for k in pooled:
            pooled[k] += out["samples"][k]
        log(
            f"P2 A/B{' compiled' if compiled else ''} process {i + 1}/{s['p2ab_processes']}: "
            f"untraced {b:.1f} ms/step, traced {f:.1f} ({100 * (f / b - 1):+.1f}%)"
        )
    b, f = median(pooled["baseline"]), median(pooled["fqntrace"])
    steps_traced = len(pooled["fqntrace"]) + s["p2ab_blocks"] // 2 * s["p2ab_processes"]
    summary = {"baseline_ms": b, "fqntrace_ms": f, "slowdown_pct": 100.0 * (f / b - 1.0)}
    summary["per_process_slowdown_pct"] = [p["slowdown_pct"] for p in per_process]
    best = 100.0 * (min(pooled["fqntrace"]) / min(pooled["baseline"]) - 1.0)
    summary.update(best_slowdown_pct=best, group_slowdown_pct_median=median(quads))
    summary.update(group_slowdown_pct_iqr=quartiles(quads), groups=len(quads))
    events = sum(p["traced_event_lines"] for p in per_process) / steps_traced
    summary.update(events_per_step=events, target="<= 3%", met=100.0 * (f / b - 1.0) <= 3.0)
    run = {"processes": s["p2ab_processes"], "blocks": s["p2ab_blocks"]}
    return run | {
        "steps_per_block": s["p2ab_steps"],
        "per_process": per_process,
        "summary": summary,
    }


def run(runner, quick):
    s = SETTINGS["quick" if quick else "full"]
    p2 = {"model": MODEL, "batch": P2_BATCH, "optimizer": "AdamW", "threads": P2_THREADS}
    p2["warmup_steps"] = s["p2_warmup"]
    log(f"P2 A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} alternating blocks")
    p2["ab"] = run_p2_ab(runner, s)
    log(f"P2 compiled A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} blocks")
    p2["compiled_ab"] = run_p2_ab(runner, s, compiled=True)
    return p2
