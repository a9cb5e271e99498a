"""Crash tolerance: a traced training loop killed with SIGKILL at random moments. `repair` must
yield a valid trace holding every event that ended more than a flush period before the kill."""
import json
import os
import random
import signal
import subprocess
import sys
import time

LOOP = """
import sys, time, torch
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
step = 0
while True:
    model(torch.randn(8, 32)).sum().backward()
    step += 1
    print(step, time.monotonic(), flush=True)
"""

KILLS = 20
FLUSH_BOUND_S = 1.0  # the contract: flushed at least once a second


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fqntrace", *args], capture_output=True,
                          text=True, timeout=120)


def test_sigkill_then_repair_keeps_everything_flushed(tmp_path):
    rng = random.Random(1234)
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    for attempt in range(KILLS):
        path = tmp_path / f"kill{attempt}.json"
        env["FQNTRACE"] = str(path)
        child = subprocess.Popen([sys.executable, "-u", "-c", LOOP], env=env,
                                 stdout=subprocess.PIPE, text=True)
        first = child.stdout.readline()  # the first step is done: tracing runs
        assert first, "the traced loop did not start"
        time.sleep(rng.uniform(0.05, 1.6))
        killed_at = time.monotonic()
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()
        child.wait()
        # The kill may cut the last printed line: only newline-terminated lines count.
        complete = (first + rest).split("\n")[:-1]
        steps = [(int(n), float(t)) for n, t in (line.split() for line in complete)]
        safe_steps = sum(1 for _, t in steps if t < killed_at - FLUSH_BOUND_S)

        repaired = cli("repair", str(path))
        assert repaired.returncode == 0, repaired.stderr
        assert repaired.stdout.startswith("repaired:") or repaired.stdout.startswith(
            "already complete"), repaired.stdout
        validated = cli("validate", str(path))
        assert validated.returncode == 0, (attempt, validated.stdout, validated.stderr)
        trace = json.load(open(path))
        nodes = [e for e in trace["traceEvents"]
                 if e.get("ph") == "X" and e["name"] == "AddmmBackward0"]
        # Two Linear layers: two AddmmBackward0 per finished step.
        assert len(nodes) >= 2 * safe_steps, (attempt, len(nodes), safe_steps)
