"""P8, DDP on 2 gloo ranks: several jobs of bench/distributed/measure.py's in-process A/B
(bench/distributed/ddp_ab.py); per step the slower rank."""
import os

from runner import HERE, PY, log, median, quartiles, run_json

SETTINGS = {
    "full": {"p8_runs": 5, "p8_blocks": 32},
    "quick": {"p8_runs": 2, "p8_blocks": 16},
}


def run_ddp(s, tmpdir):
    """P8: DDP on 2 ranks, in-process A/B (bench/distributed/measure.py --ab-blocks), several jobs."""
    runs = []
    for i in range(s["p8_runs"]):
        j = os.path.join(tmpdir, f"ddp{i}.json")
        r = run_json([PY, os.path.join(HERE, "distributed", "measure.py"), "--skip-overhead",
                      "--skip-comm", "--ab-blocks", str(s["p8_blocks"]), "--out",
                      os.path.join(tmpdir, f"ddp{i}"), "--json", j], j, timeout=900)
        if r:
            r["raw_group_overheads"] = r.pop("group_overheads")
            runs.append(r)
    if not runs:
        return None
    overheads = [r["overhead"] for r in runs]
    groups = [g for r in runs for g in r["raw_group_overheads"]]
    value = median(overheads)
    return {"runs": runs, "blocks": s["p8_blocks"], "overhead_median": value,
            "overhead_iqr": quartiles(overheads), "group_median": median(groups),
            "group_iqr": quartiles(groups), "groups": len(groups),
            "untraced_ms_median": median([r["untraced_ms"] for r in runs]),
            "traced_ms_median": median([r["traced_ms"] for r in runs]),
            "target": {"value": value, "target": "<= 3 %", "met": value <= 0.03}}


def run(runner, quick):
    s = SETTINGS["quick" if quick else "full"]
    log(f"P8: DDP 2 ranks, in-process A/B, {s['p8_runs']} jobs x {s['p8_blocks']} blocks")
    return run_ddp(s, runner.tmpdir)
