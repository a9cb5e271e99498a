"""P5, memory while tracing to disk: a torch.add loop with RSS every ~0.5 s, fqntrace against
no tracing and torch.profiler (which keeps every event in memory, so it runs fewer ops)."""

import statistics

from runner import log

SETTINGS = {
    "full": {
        "p5_ops": 10000000,
        "p5_budget": 120.0,
        "p5_profiler_ops": 1000000,
        "p5_baseline_ops": 5000000,
    },
    "quick": {
        "p5_ops": 1000000,
        "p5_budget": 30.0,
        "p5_profiler_ops": 200000,
        "p5_baseline_ops": 500000,
    },
}


def rss_summary(rss, warmup_fraction=0.1):
    """Growth after warm-up (the first 10% of ops, at least 2 s), and whether it is flat."""
    points = rss["points"]
    total = points[-1][1]
    cut = next(
        (i for i, (t, n, _) in enumerate(points) if n >= warmup_fraction * total and t >= 2.0),
        len(points) - 1,
    )
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
    return {
        "ops": total,
        "seconds": points[-1][0],
        "warmup_end_s": after[0][0],
        "rss_start_mb": points[0][2] / 1024,
        "rss_after_warmup_mb": ref / 1024,
        "max_growth_after_warmup_mb": growth_kb / 1024,
        "growth_from_start_mb": (max(p[2] for p in points) - points[0][2]) / 1024,
        "second_half_growth_mb": (second_max - first_max) / 1024,
        "slope_mb_per_million_ops": slope,
        "flat": (second_max - first_max) <= 1024 and (slope is None or abs(slope) < 0.5),
        "ops_per_second": total / points[-1][0] if points[-1][0] else None,
    }


def run_p5(runner, s):
    log(f"P5: fqntrace, up to {s['p5_ops']:,} ops or {s['p5_budget']:.0f} s")
    fq = runner.run(
        "fqntrace",
        "rss",
        ["--ops", s["p5_ops"], "--budget", s["p5_budget"], "--interval", 0.5, "--threads", 1],
    )
    log(f"P5: baseline, {s['p5_baseline_ops']:,} ops")
    base = runner.run(
        "baseline",
        "rss",
        ["--ops", s["p5_baseline_ops"], "--budget", 60, "--interval", 0.5, "--threads", 1],
    )
    log(f"P5: torch.profiler, {s['p5_profiler_ops']:,} ops")
    prof = runner.run(
        "profiler",
        "rss",
        ["--ops", s["p5_profiler_ops"], "--budget", 60, "--interval", 0.5, "--threads", 1],
    )
    tf = fq["trace_file"]
    footer = tf["footer"]
    fq_sum = rss_summary(fq["rss"])
    fq_sum.update(
        {
            "stopped_by_budget": fq["rss"]["stopped_by_budget"],
            "trace_bytes": tf["bytes"],
            "trace_lines": tf["lines"],
            "trace_event_lines": tf["event_lines"],
            "footer_x_events": footer.get("events"),
            "dropped_events": footer.get("dropped_events"),
            "complete": footer.get("complete"),
            "bytes_per_event": tf["bytes"] / tf["event_lines"] if tf["event_lines"] else None,
            "ops_planned": s["p5_ops"],
            "target": "<= 32 MB and flat",
        }
    )
    fq_sum["met"] = fq_sum["max_growth_after_warmup_mb"] <= 32 and fq_sum["flat"]
    pr = prof["rss"]
    p_points = pr["points"]
    p_ops = p_points[-1][1]
    during_mb = (p_points[-1][2] - p_points[0][2]) / 1024
    prof_sum = {
        "ops": p_ops,
        "seconds": p_points[-1][0],
        "growth_during_mb": during_mb,
        "mb_per_million_ops": during_mb / (p_ops / 1e6),
        "rss_after_exit_growth_mb": (pr["rss_after_exit_kb"] - p_points[0][2]) / 1024,
        "mb_per_million_ops_after_exit": (pr["rss_after_exit_kb"] - p_points[0][2])
        / 1024
        / (p_ops / 1e6),
        "exit_seconds": pr["exit_seconds"],
    }
    return {
        "fqntrace": fq_sum,
        "baseline": rss_summary(base["rss"]),
        "profiler": prof_sum,
        "raw": {"fqntrace": fq["rss"], "baseline": base["rss"], "profiler": pr},
    }


def run(runner, quick):
    return run_p5(runner, SETTINGS["quick" if quick else "full"])
