"""What every benchmark part runs on: its measurement processes (bench/run_mode.py, one mode
each, with the environment the mode needs), the facts of a trace file, the statistics the
parts report (median, quartiles) and the log line.
"""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

from modes import environment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
# The main build, for P4's exporter benchmark (scripts/bench.sh sets it with --build DIR).
BUILD = os.environ.get("FQNTRACE_BENCH_BUILD", os.path.join(ROOT, "build"))


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values):
    return statistics.median(values) if values else None


def ratio(a, b):
    """a / b; None when b is missing or not above zero: a ratio over a cost that noise pushed to
    zero or below means nothing ("n/a" in the tables)."""
    return a / b if b is not None and b > 0 else None


def target(text, value, limit, at_least=False):
    """A part's target, as the tables read it: met is None when nothing was measured."""
    met = None if value is None else value >= limit if at_least else value <= limit
    return {"target": text, "value": value, "met": met}


def quartiles(values):
    if len(values) < 2:
        return [values[0], values[0]] if values else [None, None]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return [q[0], q[2]]


def rotated(modes, r):
    k = r % len(modes)
    return modes[k:] + modes[:k]


class Runner:
    def __init__(self, tmpdir):
        self.tmpdir = tmpdir
        self.count = 0

    def run(self, mode, benches, args, timeout=900):
        """One child process; returns its JSON (plus the trace facts for the fqntrace modes)."""
        self.count += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
        env.setdefault("OMP_NUM_THREADS", "1")
        tracing = environment(mode, os.path.join(self.tmpdir, f"run{self.count}.json"))
        env.update(tracing)
        trace = tracing.get("FQNTRACE")
        cmd = [PY, os.path.join(HERE, "run_mode.py"), "--mode", mode, "--bench", benches]
        cmd += map(str, args)
        proc = subprocess.run(
            cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if trace is not None:
            out["trace_file"] = trace_facts(trace)
            os.remove(trace)
        return out


def trace_facts(path):
    """Size, streaming line count and the footer of a Chrome trace (one event per line)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        newlines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))
        f.seek(max(0, size - 4096))
        tail = f.read().decode("utf-8", "replace")
    footer, marker = {}, tail.rfind('"fqntrace": ')
    if marker >= 0:
        with contextlib.suppress(ValueError):  # a cut tail: no footer
            footer = json.loads(tail[marker + 12 :].rstrip().rstrip("}").strip() + "}")
    lines = newlines + 1
    # Line 1 is the header, the last line the tail; every line between is one event.
    return {"bytes": size, "lines": lines, "event_lines": max(0, lines - 2), "footer": footer}


def run_json(cmd, out_json=None, timeout=1800, env=None):
    """Runs a bench script; returns the numbers it writes to `out_json`, or without it the JSON it
    prints last (None on failure)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)
    if proc.returncode != 0:
        log(f"{os.path.relpath(cmd[1], ROOT)} failed (skipped):\n{proc.stderr[-2000:]}")
        return None
    if out_json is None:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    with open(out_json) as f:
        return json.load(f)
