"""Training steps in a trace: the ``ProfilerStep#N`` ranges (Kineto's name, which HTA's step
analysis reads) and each module's time per step, for `python -m fqntrace summary`: its op time
and, in traces that carry it (``self_cpu_ns``, plugin/thread_cpu.h), its thread CPU time.

An event belongs to step N when its start lies in ``[ts, ts + dur)`` of the ``ProfilerStep#N``
range of its process, on any thread (the rule HTA applies). Events before the first step range or
after the last belong to no step.
"""

import bisect
import re
import statistics

from fqntrace.analysis import stats, trace_events, tracestream, whole_file
from fqntrace.analysis.trace_events import PHASES, lineage, ms, to_ns

STEP_PREFIX = "ProfilerStep#"
STEP_MARK = STEP_PREFIX.encode()  # what a byte search for the step ranges' lines looks for
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
DEFAULT_EXCLUDED = frozenset({0})
# A module whose step-to-step spread (1.4826 MAD / median of its per-step time) is above this
# many percent is flagged noisy: a change of that size cannot be told from its noise.
NOISY_PCT = 10.0


def parse_step_list(text):
    """Step numbers from "0", "0,1", "0-2,5" or "none" (the empty set). Raises ValueError."""
    text = text.strip()
    if text.lower() in ("none", ""):
        return frozenset()
    out = set()
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(
                f"expected step numbers such as 0 or 0,1 or 0-2, or none; got {part!r}"
            )
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise ValueError(f"{part!r}: the range goes backwards")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def number_in_name(name):
    """N of a range named ProfilerStep#N, else None."""
    m = STEP_NAME.match(name)
    return int(m.group(1)) if m else None


def step_number(event):
    """N of a ProfilerStep#N range (user_annotation), else None."""
    name = event.get("name")
    if event.get("cat") != "user_annotation" or not isinstance(name, str):
        return None
    return number_in_name(name)


def step_ranges(timed_events):
    """{pid: [(start_ns, end_ns, step)]} of the ProfilerStep#N ranges among (event, start_ns,
    end_ns) triples: the ranges StepTimes.from_ranges() takes."""
    ranges = {}
    for e, start, end in timed_events:
        step = step_number(e)
        if step is not None:
            ranges.setdefault(e.get("pid"), []).append((start, end, step))
    return ranges


def read_step_ranges(path):
    """A first pass over a trace file: step_ranges() of its step ranges, or None when it has
    none. Only the lines holding STEP_MARK are decoded (a byte search); a file not in the core's
    layout is decoded whole."""
    found = whole_file.lines_with(path, STEP_MARK)
    if found is None:
        with tracestream.TraceStream(path) as stream:
            found = list(stream)  # only the step ranges are kept below
    timed = (
        (e, to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]))
        for e in found
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and trace_events.is_number(e.get("ts"))
        and trace_events.is_number(e.get("dur"))
    )
    return step_ranges(timed) or None


class StepTimes:
    """Per-step op time of every (fqn, phase), filled op by op by summarize()."""

    @classmethod
    def from_ranges(cls, ranges):
        """From {pid: [(start_ns, end_ns, step)]} (a first pass over a streamed trace, or
        step_ranges() of a loaded one)."""
        self = cls.__new__(cls)
        self._set_ranges(ranges)
        return self

    def _set_ranges(self, ranges):
        self._ranges = {pid: sorted(r) for pid, r in ranges.items()}
        self._starts = {pid: [r[0] for r in rs] for pid, rs in self._ranges.items()}
        self.durations = {}  # step -> ns (summed over processes in a merged trace)
        for rs in self._ranges.values():
            for start, end, step in rs:
                self.durations[step] = self.durations.get(step, 0) + (end - start)
        self._times = {}  # step -> {(fqn, phase): ns}
        self._cpu = {}  # step -> {(fqn, phase): self CPU ns}

    def step_of(self, pid, ts_ns):
        starts = self._starts.get(pid)
        if not starts:
            return None
        k = bisect.bisect_right(starts, ts_ns) - 1
        if k < 0:
            return None
        start, end, step = self._ranges[pid][k]
        return step if ts_ns < end else None

    def add_to_step(self, step, fqn, phase, ns):
        if step is None:
            return
        per = self._times.setdefault(step, {})
        per[(fqn, phase)] = per.get((fqn, phase), 0) + ns

    def add_cpu(self, event, start_ns, fqn, phase, ns):
        """A range's self CPU time (args.self_cpu_ns), in the step its start lies in."""
        if self._ranges:
            self.add_cpu_to_step(self.step_of(event.get("pid"), start_ns), fqn, phase, ns)

    def add_cpu_to_step(self, step, fqn, phase, ns):
        if step is not None:
            per = self._cpu.setdefault(step, {})
            per[(fqn, phase)] = per.get((fqn, phase), 0) + ns

    def self_times(self, step):
        """{(fqn, phase): self time in ns} of one step."""
        return dict(self._times.get(step, {}))

    def summary(self, exclude, modules):
        """The summary's `steps` object (with `kept`: the step numbers the per-step numbers
        cover), and in each of `modules`' phase objects step_median_ms / step_self_median_ms /
        step_mad_ms, in each module step_self_ms (self time per kept step, all phases: the
        samples `diff` tests), step_spread_pct and noisy; with CPU times also step_cpu_median_ms
        / step_self_cpu_median_ms per phase and step_self_cpu_ms per module (the samples `diff`
        gates on then), and cpu_ms per step. None when the trace has no step ranges."""
        if not self.durations:
            return None
        all_steps = sorted(self.durations)
        kept = [s for s in all_steps if s not in exclude]
        per_step = []
        for s in all_steps:
            op_ns = sum(self._times.get(s, {}).values())
            row = {
                "step": s,
                "ms": ms(self.durations[s]),
                "op_ms": ms(op_ns),
                "excluded": s in exclude,
            }
            if self._cpu:
                row["cpu_ms"] = ms(sum(self._cpu.get(s, {}).values()))
            per_step.append(row)
        out = {
            "count": len(kept),
            "recorded": len(all_steps),
            "excluded": sorted(s for s in all_steps if s in exclude),
            "per_step": per_step,
        }
        if kept:
            lengths = [self.durations[s] / 1e6 for s in kept]
            median = statistics.median(lengths)
            out.update(
                {
                    "median_ms": round(median, 6),
                    "min_ms": round(min(lengths), 6),
                    "max_ms": round(max(lengths), 6),
                    "mad_ms": round(statistics.median(abs(v - median) for v in lengths), 6),
                    "median_op_ms": round(
                        statistics.median(sum(self._times.get(s, {}).values()) / 1e6 for s in kept),
                        6,
                    ),
                }
            )
        # Per module: the median over the kept steps of its time in each (0 in a step it did not
        # run in), for itself and with its submodules (each fqn's time added to its ancestors).
        subtrees = _subtrees(self._times, kept)
        cpu_subtrees = _subtrees(self._cpu, kept) if self._cpu else None
        for fqn, entry in modules.items():
            subtree_all = [0] * len(kept)  # all phases, for the module's spread
            self_all = [0] * len(kept)
            cpu_all = [0] * len(kept)
            for phase in PHASES:
                p = entry.get(phase)
                if not isinstance(p, dict):
                    continue
                own = [self._times.get(s, {}).get((fqn, phase), 0) for s in kept]
                subtree = [sub.get((fqn, phase), 0) for sub in subtrees]
                p["step_median_ms"] = ms(statistics.median(subtree)) if kept else 0.0
                p["step_self_median_ms"] = ms(statistics.median(own)) if kept else 0.0
                p["step_mad_ms"] = ms(stats.mad(subtree))
                for k in range(len(kept)):
                    subtree_all[k] += subtree[k]
                    self_all[k] += own[k]
                if cpu_subtrees is not None:
                    own_cpu = [self._cpu.get(s, {}).get((fqn, phase), 0) for s in kept]
                    cpu = [sub.get((fqn, phase), 0) for sub in cpu_subtrees]
                    p["step_cpu_median_ms"] = ms(statistics.median(cpu)) if kept else 0.0
                    p["step_self_cpu_median_ms"] = ms(statistics.median(own_cpu)) if kept else 0.0
                    for k in range(len(kept)):
                        cpu_all[k] += own_cpu[k]
            # The samples `diff` tests (self time, all phases, one per kept step, in step order)
            # and the spread `summary` flags.
            entry["step_self_ms"] = [ms(v) for v in self_all]
            if cpu_subtrees is not None:
                entry["step_self_cpu_ms"] = [ms(v) for v in cpu_all]
            spread = stats.spread_pct(subtree_all)
            entry["step_spread_pct"] = None if spread is None else round(spread, 3)
            entry["noisy"] = bool(spread is not None and len(kept) > 1 and spread > NOISY_PCT)
        out["kept"] = kept
        return out


def _subtrees(times, kept):
    """Per kept step, {(fqn, phase): ns} of each module with its submodules (each fqn's time
    added to its ancestors')."""
    out = []
    for s in kept:
        sub = {}
        for (f, p), ns in times.get(s, {}).items():
            for module in lineage(f):
                key = (module, p)
                sub[key] = sub.get(key, 0) + ns
        out.append(sub)
    return out


def has_steps(summary):
    """The summary has per-step medians to show (steps recorded, some not excluded)."""
    s = summary.get("steps")
    return isinstance(s, dict) and trace_events.is_number(s.get("count")) and s["count"] > 0
