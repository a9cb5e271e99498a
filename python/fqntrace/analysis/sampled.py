"""The summary of a sampled trace (FQNTRACE_SAMPLE=p < 1, the header's "sample"): what is
exact stays exact, what was sampled is scaled by 1/p, with its error.

A sampled trace holds every module scope, step, user scope and autograd node, and each op with
probability p (torch's own sampling: an op not picked leaves no trace at all, so an op in the file
does not know whether an op around it ran). Op time as the full trace counts it (the outermost
ops, summed per module) cannot be rebuilt from such ops: most of those seen are nested in an op
that was not picked. So a module's time here is what the complete ranges measure:

* forward and recompute: the module scope's own wall time (its duration less its submodules'),
  exact — it holds the module's ops and the Python between them;
* backward: its autograd nodes' time (every node is recorded and attributed through the
  sequence numbers its forward created), exact. Only a fraction p of the nodes is written; the
  backward module spans carry the time of all of them (args.node_ns, header
  "sampleNodeSpans": true). A node of no module, and every node when the spans are off, is
  written and counted itself;
* outside every module: a top-level user scope (the optimizer's `Optimizer.step#…`,
  `record_function`) by its own wall time, exact; an op outside any of these (a loss computed
  outside the model) by its sampled ops, each counted at dur/p — an estimate, with its 95 %
  interval (Bernoulli sampling: variance (1-p)/p^2 * sum dur^2). Only the ops the program called
  count: such an op carries how deep it lies on its thread's stack (args.stack_depth), and one
  lying more than NESTED_BYTES below the shallowest of its thread was called by an op that was
  not picked (its time is inside that op's, which counts when picked);
* op counts, FLOPs and the op mix (top ops: each sampled op at dur/p and 1/p calls, nested ones
  included): estimates.

docs/sampling.md says when to use which mode and how close the two come on a real model.
The native engine applies these rules (analysis/engine_sampled.cpp, Engine(sample=p)) wherever
it is built; SampledSummary is its Python fallback, held equal to it by test_sampled.py.
"""

import math
from typing import NamedTuple

from fqntrace.analysis import step_times, trace_events
from fqntrace.analysis.step_times import STEP_PREFIX
from fqntrace.analysis.summary_totals import ENGINE_WRAPPER, Totals, event_name, summary_result
from fqntrace.analysis.trace_events import PHASES, ms

# How much deeper than the program's own calls an op lies when an op called it: the dispatcher's
# frames and the calling kernel's, at least ~600 bytes on x86-64 (measured: ops the demo's loop
# calls lie within 210 bytes of each other, the first nested ones 640 bytes below).
NESTED_BYTES = 512
# What a module's time is in a sampled summary, where it differs from a full trace's op time
# (the JSON's "time_definition", said by the table's notes and the report): a full, windowed or
# captured trace counts op time, so Global there has no Python between ops in it.
TIME_DEFINITION = (
    "scope wall time (forward, recompute: Python between ops included), autograd "
    "node time (backward); ops outside every scope estimated from the sampled ones"
)
_Z95 = 1.959963984540054


def sample_of(header):
    """The header's sampling probability when the trace is sampled (0 < p < 1), else None."""
    p = header.get("sample") if isinstance(header, dict) else None
    if trace_events.is_number(p) and not isinstance(p, bool) and 0 < p < 1:
        return float(p)
    return None


class _Thread:
    __slots__ = ("walls", "nodes", "loose", "settled")

    def __init__(self):
        self.walls = []  # finished module scopes and top-level scopes: (start, end, dur)
        self.nodes = []  # finished autograd nodes: (start, end, dur)
        self.loose = []  # sampled ops outside every complete range: (start, end, _Loose)
        self.settled = []  # loose ops nothing encloses: (start, end, _Loose), counted at the end


class _Loose(NamedTuple):
    """What the estimate needs of a loose op, kept instead of its whole event: a long job's
    settled ops wait for the end (the shallowest stack depth is known only then)."""

    pid: object
    fqn: str
    phase: object
    stack_depth: object  # int, or None when the op carries none


def _loose(e):
    args = e["args"]
    depth = args.get("stack_depth")
    return _Loose(
        e.get("pid"), args["fqn"], args.get("phase"), depth if type(depth) is int else None
    )


def _pop_enclosed(items, start, end, tol=trace_events.NEST_TOLERANCE_NS):
    """Removes and returns the items inside [start, end]: on a thread in end order they are the
    last ones (everything a range encloses ends before it)."""
    out = []
    while items and items[-1][0] >= start - tol and items[-1][1] <= end + tol:
        out.append(items.pop())
    return out


def _add_top(record, name, ns):
    """A sampled op in its module's op mix (not in its time: the complete ranges give that)."""
    top = record["top"].get(name)
    if top is None:
        top = record["top"][name] = [0, 0]
    top[0] += ns
    top[1] += 1


class SampledSummary:
    """Feed it every event of a sampled trace in file order (add()), then result()."""

    def __init__(self, p, node_spans=False, per_step=None):
        self.p = p
        self.node_spans = node_spans  # the spans carry the nodes' time: written nodes are a sample
        self.totals = Totals()
        self.totals.step_cpu = per_step
        self.per_step = per_step
        self.threads = {}
        self.variance = {}  # (fqn, phase) -> variance of the estimated part, ns^2
        self.exclude_steps = step_times.DEFAULT_EXCLUDED

    def _time(self, pid, fqn, phase, start, ns):
        if phase not in PHASES:
            return
        # A backward span can name a module before any of its events (a compiled graph's
        # submodule, whose forward ran inside the graph and whose picked ops come later).
        self.totals.module(fqn)["phases"][phase]["self_ns"] += ns
        self.totals.note_start(fqn, start)
        if self.per_step is not None:
            self.per_step.add_to_step(self.per_step.step_of(pid, start), fqn, phase, ns)

    def _estimate(self, op, start, end):
        dur = end - start
        self._time(op.pid, op.fqn, op.phase, start, round(dur / self.p))
        key = (op.fqn, op.phase)
        self.variance[key] = self.variance.get(key, 0.0) + (1 - self.p) / self.p**2 * dur * dur

    def _settle_loose(self, thread, start=None, end=None):
        """Counts the loose ops that nothing can enclose any more: all of them, or those outside
        [start, end] (a range at depth 0 that does not enclose them came after their own)."""
        keep = []
        for item in thread.loose:
            if start is not None and item[0] >= start and item[1] <= end:
                keep.append(item)
            else:
                thread.settled.append(item)
        thread.loose = keep

    def add(self, e):
        self.totals.add_in_file_order(e)
        if not isinstance(e, dict) or e.get("ph") != "X":
            return
        if trace_events.is_module_view(e):
            self._span(e)
            return
        args = e.get("args")
        ts, dur = e.get("ts"), e.get("dur")
        if (
            type(args) is not dict
            or type(args.get("fqn")) is not str
            or not trace_events.is_number(ts)
            or not trace_events.is_number(dur)
            or dur < 0
        ):
            return
        start = round(ts * 1000)
        end = start + round(dur * 1000)
        is_op = e.get("cat") == "cpu_op"
        record = self.totals.add_event(e, start, is_op)
        name = event_name(e)
        if name.startswith(STEP_PREFIX):
            return
        thread = self.threads.setdefault((str(e.get("pid")), str(e.get("tid"))), _Thread())
        fqn, phase = args["fqn"], args.get("phase")
        ns = end - start
        if is_op and "Fwd thread id" in args and not name.startswith(ENGINE_WRAPPER):
            # an autograd node; a node inside it (a reentrant backward) counts apart
            inner = _pop_enclosed(thread.nodes, start, end)
            _pop_enclosed(thread.loose, start, end)
            if not self.node_spans or fqn == "Global":
                self._time(e.get("pid"), fqn, phase, start, ns - sum(d for _, _, d in inner))
            thread.nodes.append((start, end, ns))
        elif is_op:
            if record is not None and not name.startswith(ENGINE_WRAPPER):
                _add_top(record, name, round(ns / self.p))
            if fqn == "Global" and record is not None and "Fwd thread id" not in args:
                _pop_enclosed(thread.loose, start, end)  # the outer op's time holds theirs
                thread.loose.append((start, end, _loose(e)))
        elif (
            e.get("cat") == "user_annotation"
            and not args.get("async_work")
            and ("module_type" in args or fqn == "Global")
        ):
            # a module scope, or a user scope outside every module: complete, counted by its
            # own wall time (less the complete ranges inside it, counted on their own)
            inner = _pop_enclosed(thread.walls, start, end) + _pop_enclosed(
                thread.nodes, start, end
            )
            _pop_enclosed(thread.loose, start, end)
            self._time(e.get("pid"), fqn, phase, start, max(ns - sum(d for _, _, d in inner), 0))
            thread.walls.append((start, end, ns))
        depth = args.get("depth")
        if type(depth) is int and depth == 0:
            # Nothing written later encloses what came before a range no written range encloses:
            # a long job's thread keeps nothing from one outermost range to the next.
            self._settle_loose(thread, start, end)
            thread.walls.clear()
            thread.nodes.clear()

    def _span(self, e):
        """A backward module span: its module's nodes' time, all of them (sampled trace)."""
        args = e.get("args")
        if not self.node_spans or type(args) is not dict:
            return
        node_ns, ts = args.get("node_ns"), e.get("ts")
        if (
            type(node_ns) is int
            and node_ns > 0
            and type(args.get("fqn")) is str
            and trace_events.is_number(ts)
        ):
            self._time(e.get("pid"), args["fqn"], args.get("phase"), round(ts * 1000), node_ns)

    def _count_settled(self, thread):
        """The program's own calls among a thread's settled loose ops count (NESTED_BYTES)."""
        known = [op.stack_depth for _, _, op in thread.settled if op.stack_depth is not None]
        shallowest = min(known) if known else None
        for start, end, op in thread.settled:
            depth = op.stack_depth
            if depth is None or shallowest is None or depth <= shallowest + NESTED_BYTES:
                self._estimate(op, start, end)
        thread.settled = []

    def result(self, header, tail, incomplete, path):
        for thread in self.threads.values():
            self._settle_loose(thread)
            self._count_settled(thread)
        return sampled_result(
            self.p,
            self.totals,
            self.variance,
            self.per_step,
            self.exclude_steps,
            header,
            tail,
            incomplete,
            path,
        )


def sampled_result(p, totals, variance, per_step, exclude_steps, header, tail, incomplete, path):
    """The summary of a sampled trace's sums (SampledSummary's, or the engine's): counts scaled
    by 1/p, the estimates' 95 % intervals from their variance {(fqn, phase): ns^2}."""
    scale = 1 / p
    for m in totals.modules.values():
        for rec in m["phases"].values():
            rec["self_ops"] = round(rec["self_ops"] * scale)
            rec["self_flops"] = round(rec["self_flops"] * scale)
            for top in rec["top"].values():
                top[1] = round(top[1] * scale)
    merged = header.get("ranks")
    out = summary_result(
        totals,
        header,
        tail,
        incomplete,
        path,
        merged if isinstance(merged, list) else None,
        per_step,
        exclude_steps,
    )
    out["sample"] = p
    out["time_definition"] = TIME_DEFINITION
    for (fqn, phase), var in variance.items():
        entry = out["modules"].get(fqn, {}).get(phase)
        if entry is not None:
            entry["estimate_ci_ms"] = ms(round(_Z95 * math.sqrt(var)))
    return out
