"""Training steps of a trace: its `ProfilerStep#N` ranges (user_annotation, one per optimizer
step, as torch.profiler names them) and the per-module op time inside each.

An op belongs to the step whose range holds its start, whatever its thread (backward ops of a GPU
run start on the autograd thread, inside the training thread's step). Each step is summarized
with fqntrace.summarize's rules, so a step's numbers add up as the whole trace's do. A trace
without step ranges has no steps (an empty list).
"""
import bisect
import re

from fqntrace.analysis import summarize, trace_events, whole_file
from fqntrace.analysis.trace_events import PHASES

STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")


STEP_MARK = "ProfilerStep#"
CHUNK_BYTES = 1 << 24


def has_step_ranges(text):
    """Cheap check on the raw text, before parsing a big trace for steps."""
    return STEP_MARK in text


def file_has_step_ranges(path):
    """The same check on a plain file, read in chunks (never whole into memory): True / False,
    or None when the file cannot be searched as it is (compressed, unreadable: read the text)."""
    if path.lower().endswith(".gz"):
        return None
    mark = STEP_MARK.encode()
    try:
        with open(path, "rb") as f:
            tail = b""
            while True:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    return False
                if mark in tail + chunk[:len(mark)] or mark in chunk:
                    return True
                tail = chunk[-(len(mark) - 1):]  # a mark split across two chunks
    except OSError:
        return None


def step_ranges(trace):
    """[(number, start_ns, end_ns)] of the trace's ProfilerStep#N ranges, in time order."""
    ranges = []
    for e in trace.slices():
        name = e.get("name")
        if not isinstance(name, str) or e.get("cat") != "user_annotation":
            continue
        match = STEP_NAME.match(name)
        if match and trace_events.is_number(e.get("ts")) and trace_events.is_number(e.get("dur")):
            start = trace_events.to_ns(e["ts"])
            ranges.append((int(match.group(1)), start, start + trace_events.to_ns(e["dur"])))
    ranges.sort(key=lambda r: r[1])
    return ranges


def _start_us(event):
    return event["ts"]


def per_step(trace):
    """One dict per step: {"step": N, "ms": the range's duration, "op_ms": {phase: ms},
    "modules": {fqn: [forward, backward, recompute total ms]}}; [] without step ranges."""
    ranges = step_ranges(trace)
    if not ranges:
        return []
    # Sorted by start in the file's own microseconds: cheaper than converting every event to ns,
    # and a step range holds the same events either way. The ranges themselves carry no time.
    timed = [e for e in trace.slices() if trace_events.is_number(e.get("ts"))]
    timed.sort(key=_start_us)
    starts = [e["ts"] for e in timed]
    out = []
    for number, start, end in ranges:
        # Half a nanosecond early: times are whole ns, so a start equal to the range's is in
        # and one equal to its end is out, whatever the float rounding of ns / 1000.
        lo = bisect.bisect_left(starts, (start - 0.5) / 1000.0)
        hi = bisect.bisect_left(starts, (end - 0.5) / 1000.0)
        part = whole_file.LoadedTrace(trace.path, trace.format, trace.header, timed[lo:hi],
                                      trace.tail)
        summary = summarize.summarize(part)
        modules = {}
        op_ms = {p: 0.0 for p in PHASES}
        for fqn, entry in summary["modules"].items():
            modules[fqn] = [entry[p]["total_ms"] for p in PHASES]
            for p in PHASES:
                op_ms[p] += entry[p]["self_ms"]
        out.append({"step": number, "ms": round((end - start) / 1e6, 6),
                    "op_ms": {p: round(v, 6) for p, v in op_ms.items()}, "modules": modules})
    return out


def per_step_from(times):
    """per_step()'s list from the step times a streamed summary kept (step_times.StepTimes:
    each counted op's self time in the step its start lies in), without holding the events."""
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
            parts = fqn.split(".")
            for depth in range(1, len(parts) + 1):  # each module's time counts in its ancestors
                row = modules.setdefault(".".join(parts[:depth]), [0, 0, 0])
                row[k] += ns
        out.append({"step": number, "ms": round(times.durations[number] / 1e6, 6),
                    "op_ms": {p: round(v, 6) for p, v in op_ms.items()},
                    "modules": {f: [round(ns / 1e6, 6) for ns in row]
                                for f, row in modules.items()}})
    return out
