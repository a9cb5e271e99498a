"""FQNTRACE_DEVICE's join: a recording's device events, from the Kineto trace torch's profiler
wrote for it, as fqntrace's trace carries them (docs/trace-format.md, *Device events*).

Each device event (kernel, memcpy, memset) gets the fqn and phase of the op that launched it by
the rule `annotate` uses (kineto_annotate.annotate_events: the op's "External id", else the
runtime call's correlation), from the attribution fqntrace's drain kept for the recording
({Record function id: (fqn, phase, module_type)}). An event whose launching op fqntrace did not
record is left out and counted. Times become wall-clock ns (the Kineto trace's
baseTimeNanoseconds + ts); each (device, stream) is one track, and an event that overlaps the one
before it without nesting (clock rounding; one stream runs one thing at a time) moves to the
stream's next lane, so every track nests. Standard library only."""

from fqntrace.analysis import kineto_annotate

# The tuple fqntrace._C.device_events takes, field by field.
FIELDS = (
    "cat", "name", "device", "stream", "lane", "wall_ns", "dur_ns", "fqn", "phase",
    "correlation", "external_id",
)  # fmt: skip
MAX_LANES = 16


def _int(value, default=-1):
    found = kineto_annotate._int(value)
    return default if found is None else found


def _ns(value):
    """Kineto's µs (a JSON number with three decimals) as whole ns."""
    return round(float(value) * 1000)


class Joined:
    """A recording's device events (FIELDS tuples) and the counts its trace's tail
    keeps: device events left out, Kineto's CPU ops and how many of them the attribution named."""

    def __init__(self, events=(), left_out=0, ops=0, ops_joined=0):
        self.events = list(events)
        self.left_out = left_out
        self.ops = ops
        self.ops_joined = ops_joined


def device_events(doc, attribution):
    """Joined, its events in end order (an inner one before the one enclosing it). `doc`: the
    Kineto trace as JSON (its events get fqn and phase in place)."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return Joined()
    counts = kineto_annotate.annotate_events(events, attribution)
    base = doc.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else 0
    found, left_out = [], 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        if e.get("cat") not in kineto_annotate.DEVICE_CATS:
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        try:
            start, dur = base + _ns(e["ts"]), max(0, _ns(e["dur"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            left_out += 1
            continue
        if not isinstance(args.get("fqn"), str) or not isinstance(args.get("phase"), str):
            left_out += 1
            continue
        device = _int(args.get("device"), _int(e.get("pid"), 0))
        stream = _int(args.get("stream"), _int(e.get("tid"), 0))
        name = e.get("name") if isinstance(e.get("name"), str) else "?"
        found.append(
            [e["cat"], name, device, stream, 0, start, dur, args["fqn"], args["phase"],
             _int(args.get("correlation")), _int(args.get(kineto_annotate.EXTERNAL_ID))]
        )  # fmt: skip
    found.sort(key=lambda f: (f[2], f[3], f[5], -f[6]))
    _assign_lanes(found)
    found.sort(key=lambda f: (f[5] + f[6], -f[5]))  # by end, as fqntrace writes every track
    return Joined(map(tuple, found), left_out, counts.cpu_ops, counts.cpu_ops_annotated)


def _assign_lanes(found):
    """In place, `found` sorted by (device, stream, start, -dur): the first lane whose last
    event ends by this one's start, or which encloses it."""
    lanes, track = [], None
    for f in found:
        if (f[2], f[3]) != track:
            track, lanes = (f[2], f[3]), []
        start, end = f[5], f[5] + f[6]
        for i, (lane_start, lane_end) in enumerate(lanes):
            if lane_end <= start or (lane_start <= start and end <= lane_end):
                f[4] = i
                if lane_end <= start:
                    lanes[i] = (start, end)
                break
        else:
            f[4] = min(len(lanes), MAX_LANES - 1)
            if len(lanes) < MAX_LANES:
                lanes.append((start, end))
