"""Shared by the ecosystem programs: a final forward/backward pass named by a fresh torch
ModTracker, whose module names the test compares with the trace's module spans.

Each program prints what the user would see (results, tracebacks) on stdout; the test runs it
untraced and traced and compares. `ECOSYSTEM_FQNS` names the file the fresh tracker's names go
to. The pass runs inside `record_function("ecosystem.final")` so the test finds its module spans
in the trace."""

import json
import os

import torch
from torch.distributed._tools.mod_tracker import ModTracker


def final_pass(model, run):
    """Runs `run()` (forward, and backward if it does) once under a fresh ModTracker; writes the
    name of every module whose forward ran, with the class it had then, to $ECOSYSTEM_FQNS."""
    seen = {}
    tracker = ModTracker()
    tracker.register_user_hooks(
        pre_fw_hook=lambda m, _inputs: seen.setdefault(tracker.get_known_fqn(m), type(m).__name__)
    )
    with torch.autograd.profiler.record_function("ecosystem.final"):
        with tracker:
            out = run()
    tracker.clear_user_hooks()
    path = os.environ.get("ECOSYSTEM_FQNS")
    if path:
        with open(path, "w") as f:
            json.dump(dict(sorted(seen.items())), f)
    return out


def show(label, value):
    """One line of a result, rounded so the two runs compare exactly."""
    if isinstance(value, torch.Tensor):
        value = round(float(value.detach().double().sum()), 6)
    print(f"{label}: {value}", flush=True)
