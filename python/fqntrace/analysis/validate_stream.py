"""validate's checks over a stream of events (tracestream.py), in memory bounded by what is still
open: one stack of pending ranges per thread, flows whose other end has not come, the modules.
A thread whose ranges are not in end order raises _NotPostOrder (validate.py then checks the file
whole). The rules are validate_rules.py's.
"""

import bisect
import json

from fqntrace.analysis import trace_events, tracestream
from fqntrace.analysis.validate_rules import (
    Relaxations,
    _check_depth,
    _check_event,
    _check_top_level,
    _depth_of,
    _describe_event,
    _Problem,
    _raise_if_cut,
    _where,
)


class _NotPostOrder(Exception):
    """A thread's ranges are not in end order: check the file whole."""


def _span_text(e):
    start = trace_events.to_ns(e["ts"])
    end = start + trace_events.to_ns(e["dur"])
    return f"{trace_events.format_us(start)}..{trace_events.format_us(end)} us"


def _overlap_problem(trace, a, b):
    """a, b: (index, line, event) of two slices that overlap without nesting, a the earlier."""
    ea, eb = a[2], b[2]
    return _Problem(
        f"slices on pid {ea.get('pid')} tid {ea.get('tid')} overlap without nesting: "
        f"{_where(trace, a[0], a[1])}{_describe_event(ea)} [{_span_text(ea)}] and "
        f"{_where(trace, b[0], b[1])}{_describe_event(eb)} [{_span_text(eb)}]"
    )


class _ClosedFlows:
    """The ids of flows that had both ends, per category: the core numbers flows 1, 2, 3, ...,
    so they are kept as ranges of consecutive numbers (a handful), other ids as they are."""

    def __init__(self):
        self._by_cat = {}

    def ids(self, cat):
        return self._by_cat.setdefault(cat, _IdSet())

    def add(self, cat, fid):
        self.ids(cat).add(fid)


class _IdSet:
    def __init__(self):
        self.starts = []  # sorted starts of disjoint ranges [start, end] of whole numbers
        self.ends = []
        self.other = set()

    def __contains__(self, text):
        if not text.isdigit():
            return text in self.other
        n = int(text)
        k = bisect.bisect_right(self.starts, n) - 1
        return k >= 0 and n <= self.ends[k]

    def add(self, text):
        if not text.isdigit():
            self.other.add(text)
            return
        n = int(text)
        k = bisect.bisect_right(self.starts, n) - 1  # the range starting at or before n
        if k >= 0 and n <= self.ends[k] + 1:
            self.ends[k] = max(self.ends[k], n)
        else:
            k += 1
            self.starts.insert(k, n)
            self.ends.insert(k, n)
        if k + 1 < len(self.starts) and self.starts[k + 1] <= self.ends[k] + 1:
            self.ends[k] = max(self.ends[k], self.ends.pop(k + 1))  # joins the next range
            self.starts.pop(k + 1)


class _StreamChecks:
    """validate's checks fed event by event (file order). Holds per thread the ranges whose
    enclosing range has not come yet, the flows still open and the modules: never the events."""

    TOL = trace_events.NEST_TOLERANCE_NS

    def __init__(self, trace):
        self.trace = trace  # the stream: format (for messages); incomplete once it is read
        self.threads = {}  # (pid, tid) -> [stack of [start, end, depth, (i, line, e)], last end]
        self.overlap = None
        self.flows = {}  # (cat, id) -> [starts, finishes, (first i, line)]; closed ones dropped
        self.closed = _ClosedFlows()  # ... and remembered here, compactly
        self.reopened = set()  # flows seen again after both ends: counted again at the end
        self.spans = set()
        self.first_op = {}  # fqn -> (i, line, event) of its first op read before any span of it
        self.compiled = []  # the compiled-code slices (docs/compile.md), few
        self.depth_problem = None  # the first range whose args.depth is not its nesting

    def add(self, i, line, e):
        _check_event(self.trace, i, e, line)
        ph = e["ph"]
        if ph == "X":
            self._slice(i, line, e)
        elif ph == "M":
            entry = trace_events.module_entry(e)
            if entry is not None:
                self.spans.add(entry[0])  # a module the trace knows, as a span does
        elif ph == "s" or ph == "f":
            key = (json.dumps(e.get("cat")), json.dumps(e["id"]))
            flow = self.flows.get(key)
            if flow is None:
                if key[1] in self.closed.ids(key[0]):
                    self.reopened.add(key)
                flow = self.flows[key] = [0, 0, (i, line)]
            flow[0 if ph == "s" else 1] += 1
            if flow[0] == 1 and flow[1] == 1 and key not in self.reopened:
                del self.flows[key]
                self.closed.add(key[0], key[1])

    def _slice(self, i, line, e):
        start = trace_events.to_ns(e["ts"])
        end = start + trace_events.to_ns(e["dur"])
        args = e.get("args")
        if e.get("cat") == "cpu_op":
            fqn = args["fqn"]
            if fqn not in self.spans and fqn not in self.first_op and fqn != "Global":
                self.first_op[fqn] = (i, line, e)
        else:
            fqn = trace_events.module_span_fqn(e)
            if fqn is not None:
                self.spans.add(fqn)
        name = e.get("name")
        if isinstance(name, str) and (
            name in trace_events.COMPILED_CODE_NAMES
            or name.startswith(trace_events.COMPILED_REGION_PREFIX)
        ):
            self.compiled.append(e)
        if e.get("cat") == trace_events.MODULE_VIEW_CAT:
            # The drain's backward module spans: a view on tracks of their own, written when a
            # stretch closes (not in end order, and their depth is the fqn level, not the
            # nesting: a recompute copied into a backward stretch keeps its forward levels).
            # Their fields are checked with every event's; the ops' nesting is on the threads.
            return
        depth = _depth_of(e)
        key = (str(e.get("pid")), str(e.get("tid")))
        thread = self.threads.get(key)
        if thread is None:
            thread = self.threads[key] = [[], end]
        elif end < thread[1] - self.TOL:
            raise _NotPostOrder(key)
        elif end > thread[1]:
            thread[1] = end
        stack = thread[0]
        tol = self.TOL
        while stack:  # the pending ranges this one encloses (trace_events.nest's rule)
            c = stack[-1]
            if c[0] < start or c[1] > end + tol or not (c[0] < end or c[0] == start):
                break
            if (
                c[2] is not None
                and depth is not None
                and c[2] != depth + 1
                and self.depth_problem is None
            ):
                try:
                    _check_depth(self.trace, c[3], (i, line, e))
                except _Problem as problem:  # said at the end, unless the trace lost events
                    self.depth_problem = problem
            stack.pop()
        if stack:
            c = stack[-1]
            if self.overlap is None and start < c[1] - tol and end > c[1] + tol:
                self.overlap = (c[3], (i, line, e))
            if depth is not None and c[2] == depth:  # a sibling: both share every parent
                if end >= c[1]:
                    c[1] = end
                    c[3] = (i, line, e)
                return
        stack.append([start, end, depth, (i, line, e)])

    def finish(self, stream_again):
        """The nesting, flow and fqn checks once every event is read; returns (threads,
        Relaxations). stream_again(): a fresh iterator of (i, line, event), for the rare checks
        that need a second look (a bad flow, a missing span in a trace with compiled code)."""
        trace = self.trace
        if self.overlap is not None:
            raise _overlap_problem(trace, *self.overlap)
        incomplete = trace.incomplete
        if self.depth_problem is not None and not incomplete:
            raise self.depth_problem
        loose = [k for k, (s, f, _) in self.flows.items() if s + f == 1 and k not in self.reopened]
        bad = [k for k, (s, f, _) in self.flows.items() if s + f != 1 or k in self.reopened]
        if bad or (loose and not incomplete):
            # Count the open flows again from the start: one closed earlier may have come back.
            keys = set(self.flows)
            counts = {}
            for i, line, e in stream_again():
                if isinstance(e, dict) and e.get("ph") in ("s", "f") and e.get("id") is not None:
                    key = (json.dumps(e.get("cat")), json.dumps(e["id"]))
                    if key in keys:
                        c = counts.setdefault(key, [0, 0, (i, line)])
                        c[0 if e["ph"] == "s" else 1] += 1
            for (cat, fid), (starts, finishes, (first, line)) in sorted(
                counts.items(), key=lambda kv: kv[1][2][0]
            ):
                if incomplete and starts + finishes == 1:
                    continue
                raise _Problem(
                    f"flow id {fid} (cat {cat}, first at {_where(trace, first, line)}) "
                    f"has {starts} \"s\" and {finishes} \"f\" events; each flow needs "
                    "exactly one of each"
                )
        missing = {f: where for f, where in self.first_op.items() if f not in self.spans}
        if missing and self.compiled:
            in_compiled = trace_events.CompiledCode(self.compiled)
            spans = set(self.spans)
            for _, _, e in stream_again():
                if (
                    isinstance(e, dict)
                    and e.get("ph") == "X"
                    and e.get("cat") == "cpu_op"
                    and e["args"]["fqn"] in missing
                    and in_compiled.contains(e)
                ):
                    spans.add(e["args"]["fqn"])
            missing = {
                f: where
                for f, where in missing.items()
                if f not in spans and not trace_events.has_ancestor_in(f, spans)
            }
        if missing and not incomplete:
            fqn, (i, line, e) = min(missing.items(), key=lambda kv: kv[1][0])
            raise _Problem(
                f"{_where(trace, i, line)}{_describe_event(e)} has fqn "
                f"{json.dumps(fqn)} but the trace has no module span for it "
                f"(\"nn.Module: {fqn}\" with args.module_type)"
            )
        return len(self.threads), Relaxations(len(loose), len(missing))


def _numbered(stream):
    """(index, line or None, event) of every event of a stream."""
    i = 0
    for batch, first_line in stream.batches():
        if first_line is None:
            for e in batch:
                yield i, None, e
                i += 1
        else:
            for k, e in enumerate(batch):
                yield i + k, first_line + k, e
            i += len(batch)


def _check_stream(path):
    """validate's checks reading the file as a stream: (events, threads, relaxations,
    incomplete). Raises _Problem, TraceError (the stream cannot read the file) or _NotPostOrder."""
    with tracestream.TraceStream(path) as stream:
        checks = _StreamChecks(stream)
        try:
            _check_top_level(stream.header, need_events=False)
            for i, line, e in _numbered(stream):
                checks.add(i, line, e)
        except _Problem as problem:
            for _ in stream:  # a cut file is reported as cut, whatever else is wrong
                pass
            _raise_if_cut(path, stream, stream.events_read)
            raise problem from None
        _raise_if_cut(path, stream, stream.events_read)

        def again():
            with tracestream.TraceStream(path) as second:
                yield from _numbered(second)

        n_threads, relaxed = checks.finish(again)
        return stream.events_read, n_threads, relaxed, stream.incomplete
