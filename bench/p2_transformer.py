"""P2, a transformer training step (fqntrace.demo.TinyTransformer, AdamW): traced and untraced
in separate processes, in rounds; then in-process A/B (bench/ab.py through bench/run_mode.py's
transformer_ab), eager and under torch.compile."""

import ab
from modes import P2_MODES
from runner import log, median, quartiles, rotated

SETTINGS = {
    "full": {
        "p2_rounds": 6,
        "p2_steps": 8,
        "p2_warmup": 2,
        "p2ab_processes": 2,
        "p2ab_blocks": 24,
        "p2ab_steps": 2,
    },
    "quick": {
        "p2_rounds": 2,
        "p2_steps": 4,
        "p2_warmup": 2,
        "p2ab_processes": 1,
        "p2ab_blocks": 8,
        "p2ab_steps": 2,
    },
}


P2_THREADS = 1


def run_p2(runner, s):
    raw = {m: [] for m in P2_MODES}
    dropped = []
    args = [
        "--steps",
        s["p2_steps"],
        "--warmup",
        s["p2_warmup"],
        "--threads",
        P2_THREADS,
        "--batch",
        8,
    ]
    for r in range(s["p2_rounds"]):
        for mode in rotated(P2_MODES, r):
            out = runner.run(mode, "transformer", args)
            raw[mode].append(out["transformer"]["samples"])
            if "trace_file" in out:
                dropped.append(out["trace_file"]["footer"].get("dropped_events"))
        b, f = median(raw["baseline"][-1]), median(raw["fqntrace"][-1])
        log(
            f"P2 round {r + 1}/{s['p2_rounds']}: baseline {b:.1f} ms/step, fqntrace {f:.1f} "
            f"({100 * (f / b - 1):+.1f}%)"
        )
    base = [median(x) for x in raw["baseline"]]
    fq = [median(x) for x in raw["fqntrace"]]
    paired = [100.0 * (f / b - 1.0) for f, b in zip(fq, base)]
    slow = 100.0 * (median(fq) / median(base) - 1.0)
    best = 100.0 * (
        min(min(x) for x in raw["fqntrace"]) / min(min(x) for x in raw["baseline"]) - 1.0
    )
    return {
        "model": "fqntrace.demo.TinyTransformer(vocab=512, dim=256, heads=4, layers=4, seq=128)",
        "batch": 8,
        "optimizer": "AdamW",
        "threads": P2_THREADS,
        "rounds": s["p2_rounds"],
        "steps_per_process": s["p2_steps"],
        "warmup_steps": s["p2_warmup"],
        "raw": raw,
        "dropped_events": dropped,
        "summary": {
            "baseline_ms": median(base),
            "fqntrace_ms": median(fq),
            "baseline_iqr_ms": quartiles(base),
            "fqntrace_iqr_ms": quartiles(fq),
            "slowdown_pct": slow,
            "paired_slowdown_pct_median": median(paired),
            "paired_slowdown_pct_iqr": quartiles(paired),
            "best_slowdown_pct": best,
            "target": "<= 3%",
            "met": slow <= 3.0,
        },
    }


def run_p2_ab(runner, s, compiled=False):
    """P2 again, traced and untraced blocks alternating inside each process (fqntrace.profile);
    `compiled`: the model under torch.compile (inductor)."""
    per_process = []
    quads = []
    pooled = {"baseline": [], "fqntrace": []}
    args = [
        "--blocks",
        s["p2ab_blocks"],
        "--steps",
        s["p2ab_steps"],
        "--warmup",
        s["p2_warmup"],
        "--threads",
        P2_THREADS,
        "--batch",
        8,
    ] + (["--compile"] if compiled else [])
    for i in range(s["p2ab_processes"]):
        out = runner.run("baseline", "transformer_ab", args)["transformer_ab"]
        b, f = median(out["samples"]["baseline"]), median(out["samples"]["fqntrace"])
        blocks = out["blocks"]
        quads += ab.group_changes(blocks)
        per_process.append(
            {
                "baseline_ms": b,
                "fqntrace_ms": f,
                "slowdown_pct": 100.0 * (f / b - 1.0),
                "raw_blocks": blocks,
                "traced_event_lines": out["traced_event_lines"],
            }
        )
        for k in pooled:
            pooled[k] += out["samples"][k]
        log(
            f"P2 A/B{' compiled' if compiled else ''} process {i + 1}/{s['p2ab_processes']}: "
            f"untraced {b:.1f} ms/step, traced {f:.1f} "
            f"({100 * (f / b - 1):+.1f}%)"
        )
    b, f = median(pooled["baseline"]), median(pooled["fqntrace"])
    steps_traced = len(pooled["fqntrace"]) + s["p2ab_blocks"] // 2 * s["p2ab_processes"]
    return {
        "processes": s["p2ab_processes"],
        "blocks": s["p2ab_blocks"],
        "steps_per_block": s["p2ab_steps"],
        "per_process": per_process,
        "summary": {
            "baseline_ms": b,
            "fqntrace_ms": f,
            "slowdown_pct": 100.0 * (f / b - 1.0),
            "per_process_slowdown_pct": [p["slowdown_pct"] for p in per_process],
            "best_slowdown_pct": 100.0 * (min(pooled["fqntrace"]) / min(pooled["baseline"]) - 1.0),
            "group_slowdown_pct_median": median(quads),
            "group_slowdown_pct_iqr": quartiles(quads),
            "groups": len(quads),
            "events_per_step": sum(p["traced_event_lines"] for p in per_process) / steps_traced,
            "target": "<= 3%",
            "met": 100.0 * (f / b - 1.0) <= 3.0,
        },
    }


def run(runner, quick):
    s = SETTINGS["quick" if quick else "full"]
    log(f"P2: {s['p2_rounds']} rounds x {len(P2_MODES)} modes, {P2_THREADS} thread")
    p2 = run_p2(runner, s)
    log(f"P2 A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} alternating blocks")
    p2["ab"] = run_p2_ab(runner, s)
    log(f"P2 compiled A/B: {s['p2ab_processes']} process(es) x {s['p2ab_blocks']} blocks")
    p2["compiled_ab"] = run_p2_ab(runner, s, compiled=True)
    return p2
