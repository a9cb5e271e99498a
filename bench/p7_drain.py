"""P7, the drain thread: its CPU per op event from outside (bench/drain_cpu.py), plain and gzip,
on a tiny-op loop and a training loop; and P4b, the demo's bytes per op event. (Drops under load
per drain nice value, once here: docs/history/experiments/drain_nice.py.)"""

import json
import os
import subprocess

from runner import HERE, PY, ROOT, log, run_json, target

SETTINGS = {
    "full": {"p7_ops": 400000, "p7_runs": 7, "p7_train_steps": 300},
    "quick": {"p7_ops": 200000, "p7_runs": 3, "p7_train_steps": 150},
}


def demo_bytes(tmpdir):
    """P4b: Chrome bytes per op event of scripts/demo.sh's run (FLOPs on, as the demo)."""
    path = os.path.join(tmpdir, "demo.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update(FQNTRACE=path, FQNTRACE_FLOPS="1", OMP_NUM_THREADS="1")
    demo = [PY, "-m", "fqntrace.demo"]
    proc = subprocess.run(demo, env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
    if proc.returncode != 0:
        log(f"demo failed (P4b skipped):\n{proc.stderr[-2000:]}")
        return None
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    size = os.path.getsize(path)
    result = {"bytes": size, "cpu_op_events": ops, "bytes_per_op_event": size / ops}
    return result | {"objects": len(events)}


def run_drain(s, tmpdir):
    """P7: drain CPU per op event from outside (bench/drain_cpu.py), plain and gzip, and P4b: the
    demo's bytes per op event."""
    out = {}

    def script(name, out_name, *args):
        """Runs bench/<name> with args and --json <tmpdir>/<out_name>; the numbers it wrote."""
        j = os.path.join(tmpdir, out_name)
        return run_json([PY, os.path.join(HERE, name), *map(str, args), "--json", j], j)

    loop = ("--ops", s["p7_ops"], "--runs", s["p7_runs"])
    log(f"P7: drain CPU per op event, {s['p7_runs']} processes x {s['p7_ops']:,} ops")
    out["cpu"] = script("drain_cpu.py", "p7.json", *loop)
    log(f"P7: the same with FQNTRACE=….json.gz, {s['p7_runs']} processes")
    out["cpu_gz"] = script("drain_cpu.py", "p7gz.json", *loop, "--suffix", ".json.gz")
    # The same ratio on a training loop (forward, backward with module spans, SGD): its steps
    # are longer than deflate's 32 KiB window, so cached line heads repeat from farther back.
    train_loop = ("--workload", "train", "--ops", s["p7_train_steps"], "--runs", s["p7_runs"])
    for key, suffix in (("train_cpu", ".json"), ("train_cpu_gz", ".json.gz")):
        log(f"P7: training loop, {suffix}, {s['p7_runs']} processes x {s['p7_train_steps']} steps")
        out[key] = script("drain_cpu.py", f"p7{key}.json", *train_loop, "--suffix", suffix)
    log("P4b: the demo's bytes per op event")
    out["demo"] = demo_bytes(tmpdir)
    # The drain's CPU per event of each run (None: it failed; the demo has none).
    ns = {key: (run or {}).get("drain_ns_per_op") for key, run in out.items()}

    def gzip_ratio(plain, gz):
        return ns[gz] / ns[plain] if ns[plain] and ns[gz] else None

    gzip = target("<= 1.5x", gzip_ratio("cpu", "cpu_gz"), 1.5) | {"gzip_ns": ns["cpu_gz"]}
    gzip["gzip_bytes_per_op"] = (out["cpu_gz"] or {}).get("bytes_per_op")
    train = target("<= 1.5x", gzip_ratio("train_cpu", "train_cpu_gz"), 1.5)
    train.update(plain_ns=ns["train_cpu"], gzip_ns=ns["train_cpu_gz"])
    demo = (out["demo"] or {}).get("bytes_per_op_event")
    out["targets"] = {"gzip_ratio": gzip, "gzip_train_ratio": train}
    out["targets"]["drain_ns"] = target("<= 100 ns", ns["cpu"], 100)
    out["targets"]["demo_bytes"] = target("<= 150", demo, 150)
    return out


def run(runner, quick):
    return run_drain(SETTINGS["quick" if quick else "full"], runner.tmpdir)
