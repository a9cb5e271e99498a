"""The report's step rows: per training step (its `ProfilerStep#N` range) the step's length, its
op time per phase and each module's op time per phase with its submodules.

The numbers are those a streamed summary kept per step (step_times.StepTimes: each counted op's
self time in the step whose range holds its start, whatever its thread), so a step's numbers add
up as the whole trace's do. A trace without step ranges has no steps (an empty list).
"""

from fqntrace.analysis.trace_events import PHASES, lineage, ms


def per_step_from(times):
    """One dict per step: {"step": N, "ms": the range's length, "op_ms": {phase: ms},
    "modules": {fqn: [forward, backward, recompute ms with its submodules]}}; [] without steps
    (times: the StepTimes of summarize.summarize_with_steps, or None)."""
    if times is None or not times.durations:
        return []
    out = []
    for number in sorted(times.durations):
        own = times.self_times(number)
        modules = {}
        op_ms = {p: 0.0 for p in PHASES}
        for (fqn, phase), ns in own.items():
            k = PHASES.index(phase)
            op_ms[phase] += ns / 1e6
            for module in lineage(fqn):  # each module's time counts in its ancestors
                row = modules.setdefault(module, [0, 0, 0])
                row[k] += ns
        out.append(
            {
                "step": number,
                "ms": ms(times.durations[number]),
                "op_ms": {p: round(v, 6) for p, v in op_ms.items()},
                "modules": {f: [ms(ns) for ns in row] for f, row in modules.items()},
            }
        )
    return out
