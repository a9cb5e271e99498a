"""P8, DDP on 2 gloo ranks: several torchrun jobs of the in-process A/B
(bench/distributed/ddp_ab.py); per step the slower rank."""

import json
import os
import statistics
import subprocess
import sys

import ab
from runner import HERE, log, median, quartiles, target

SETTINGS = {
    "full": {"p8_runs": 5, "p8_blocks": 32},
    "quick": {"p8_runs": 2, "p8_blocks": 16},
}
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def torchrun(script, args, env_extra=None):
    """`script` under torchrun on 2 ranks, FQNTRACE unset (and `env_extra` set); its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(OMP_NUM_THREADS="1", **(env_extra or {}))
    cmd = [TORCHRUN, "--standalone", "--nproc_per_node=2", script, *args]
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    proc = subprocess.run(cmd, env=env, timeout=600, **output)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    return proc.stdout


def ab_job(blocks, steps, out, extra=()):
    """One job of ddp_ab.py: traced and untraced blocks alternate; per step the slower rank."""
    args = ["--blocks", str(blocks), "--steps", str(steps), "--out", out, *extra]
    torchrun(os.path.join(HERE, "distributed", "ddp_ab.py"), args)
    ranks = []
    for r in (0, 1):
        with open(os.path.join(out, f"ab.{r}.times.json")) as f:
            ranks.append(json.load(f))
    # Per block: (traced, the slower rank's time for each step).
    blocks_ms = [
        (block[0], [max(t) for t in zip(*(r["blocks"][b][1] for r in ranks))])
        for b, block in enumerate(ranks[0]["blocks"])
    ]
    untraced, traced = ab.arms(blocks_ms)
    groups = [pct / 100 for pct in ab.group_changes(blocks_ms, statistics.median)]
    off, on = statistics.median(untraced), statistics.median(traced)
    job = {"blocks": blocks, "steps_per_block": steps, "train_args": list(extra)}
    job.update(untraced_ms=off, traced_ms=on, overhead=on / off - 1, group_overheads=groups)
    return job | {"group_median": statistics.median(groups)}


def run_ddp(s, tmpdir):
    """P8: DDP on 2 ranks, in-process A/B, several jobs of 4-step blocks."""
    runs = []
    for i in range(s["p8_runs"]):
        out = os.path.join(tmpdir, f"ddp{i}")
        os.makedirs(out, exist_ok=True)
        try:
            r = ab_job(s["p8_blocks"], 4, out)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            log(f"P8 job {i} failed (skipped):\n{str(e)[-2000:]}")
            continue
        r["raw_group_overheads"] = r.pop("group_overheads")
        runs.append(r)
    if not runs:
        return None
    overheads = [r["overhead"] for r in runs]
    groups = [g for r in runs for g in r["raw_group_overheads"]]
    value = median(overheads)
    ddp = {"runs": runs, "blocks": s["p8_blocks"], "overhead_median": value}
    ddp.update(overhead_iqr=quartiles(overheads), group_median=median(groups))
    ddp.update(group_iqr=quartiles(groups), groups=len(groups))
    for arm in ("untraced_ms", "traced_ms"):
        ddp[f"{arm}_median"] = median([r[arm] for r in runs])
    return ddp | {"target": target("<= 3 %", value, 0.03)}


def run(runner, quick):
    s = SETTINGS["quick" if quick else "full"]
    log(f"P8: DDP 2 ranks, in-process A/B, {s['p8_runs']} jobs x {s['p8_blocks']} blocks")
    return run_ddp(s, runner.tmpdir)
