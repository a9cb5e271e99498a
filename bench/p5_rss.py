"""P5, memory while tracing to disk: a torch.add loop with RSS every ~0.5 s, fqntrace against
no tracing and torch.profiler (which keeps every event in memory, so it runs fewer ops)."""

import statistics

from runner import log

SETTINGS = {
    "full": dict(
        p5_ops=10000000, p5_budget=120.0, p5_profiler_ops=1000000, p5_baseline_ops=5000000
    ),
    "quick": dict(p5_ops=1000000, p5_budget=30.0, p5_profiler_ops=200000, p5_baseline_ops=500000),
}


def rss_summary(rss, warmup_fraction=0.1):
    """Growth after warm-up (the first 10% of ops, at least 2 s), and whether it is flat."""
    points, total = rss["points"], rss["points"][-1][1]
    cut = next(
        (i for i, (t, n, _) in enumerate(points) if n >= warmup_fraction * total and t >= 2.0),
        len(points) - 1,
    )
    after, ref = points[cut:], points[cut][2]
    growth_kb = max(p[2] for p in after) - ref
    half = len(after) // 2
    first_max = max(p[2] for p in after[:half]) if half else ref
    second_max = max(p[2] for p in after[half:])
    slope = None
    if len(after) >= 3:
        xs, ys = [p[1] / 1e6 for p in after], [p[2] / 1024 for p in after]
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
    def rss(mode, ops, budget):  # RSS every 0.5 s while `mode` loops tiny ops
        return runner.run(
            mode, "rss", ["--ops", ops, "--budget", budget, "--interval", 0.5, "--threads", 1]
        )

    log(f"P5: fqntrace, up to {s['p5_ops']:,} ops or {s['p5_budget']:.0f} s")
    fq = rss("fqntrace", s["p5_ops"], s["p5_budget"])
    log(f"P5: baseline, {s['p5_baseline_ops']:,} ops")
    base = rss("baseline", s["p5_baseline_ops"], 60)
    log(f"P5: torch.profiler, {s['p5_profiler_ops']:,} ops")
    prof = rss("profiler", s["p5_profiler_ops"], 60)
    tf, footer = fq["trace_file"], fq["trace_file"]["footer"]
    fq_sum = rss_summary(fq["rss"])
    fq_sum.update(stopped_by_budget=fq["rss"]["stopped_by_budget"], trace_bytes=tf["bytes"])
    fq_sum.update(trace_lines=tf["lines"], trace_event_lines=tf["event_lines"])
    fq_sum.update(footer_x_events=footer.get("events"), dropped_events=footer.get("dropped_events"))
    fq_sum.update(complete=footer.get("complete"))
    fq_sum["bytes_per_event"] = tf["bytes"] / tf["event_lines"] if tf["event_lines"] else None
    fq_sum.update(ops_planned=s["p5_ops"], target="<= 32 MB and flat")
    fq_sum["met"] = fq_sum["max_growth_after_warmup_mb"] <= 32 and fq_sum["flat"]
    pr = prof["rss"]
    (_, _, rss0), (t1, p_ops, rss1) = pr["points"][0], pr["points"][-1]
    during_mb, after_exit_mb = (rss1 - rss0) / 1024, (pr["rss_after_exit_kb"] - rss0) / 1024
    prof_sum = {"ops": p_ops, "seconds": t1, "growth_during_mb": during_mb}
    prof_sum["mb_per_million_ops"] = during_mb / (p_ops / 1e6)
    prof_sum["rss_after_exit_growth_mb"] = after_exit_mb
    prof_sum["mb_per_million_ops_after_exit"] = after_exit_mb / (p_ops / 1e6)
    prof_sum["exit_seconds"] = pr["exit_seconds"]
    return {
        "fqntrace": fq_sum,
        "baseline": rss_summary(base["rss"]),
        "profiler": prof_sum,
        "raw": {"fqntrace": fq["rss"], "baseline": base["rss"], "profiler": pr},
    }


def run(runner, quick):
    return run_p5(runner, SETTINGS["quick" if quick else "full"])
