"""`python -m fqntrace validate`: checks a trace and names its first problem.

The checks, in order: the file reads as a trace (not cut off), the top-level fields, every event,
nesting per thread, flow pairs, and a module span for every op's fqn. An incomplete trace (cut,
repaired, or with dropped events) may lack one end of a flow or the span of an fqn; those are
counted instead of reported.

The trace is read as a stream (tracestream.py), in memory bounded by what is still open
(a thread's pending ranges, flows whose "f" has not come, the modules), never by the file: the
core writes each range when it ends, so a range comes after everything it encloses and nesting
is checked with one stack per thread (siblings at the same args.depth merged). A file not in
that order (not written by the core) is loaded whole (whole_file.load) and checked so.

When the native engine is built (fqntrace.analysis._native_summary) the per-event, nesting, flow
and span checks run there first, on the reader's blocks of event lines: a file they pass (the
common case) gets its "ok" line from them. Anything they find, or leave to Python (a flow id
that is neither an int nor a string, compiled code with fqns lacking spans, ...), sends the file
through the Python checks below, which name the problem exactly as without the engine.
"""

import bisect
import json
from typing import NamedTuple

from fqntrace.analysis import summarize, summarize_native, trace_events, tracestream, whole_file
from fqntrace.analysis.errors import DamagedTrace, NotATrace, TraceError, repair_hint
from fqntrace.analysis.trace_events import PHASES


class Relaxations(NamedTuple):
    """What an incomplete trace was allowed to lack."""

    flows: int  # flows missing one end
    fqns: int  # fqns whose module span is missing


def validate_file(path):
    """The success line for a valid trace; raises TraceError with the first problem."""
    if summarize._native is not None:
        try:
            passed = _check_native(path)
        except _Problem as problem:  # cut off: said as the Python checks say it
            raise TraceError(f"{path}: {problem}") from None
        if passed is not None:
            return _ok_line(*passed)
    try:
        try:
            n_events, n_threads, relaxed, incomplete = _check_stream(path)
        except _NotPostOrder:
            n_events, n_threads, relaxed, incomplete = _check_whole(path)
    except TraceError as error:
        raise _reworded(path, error) from None
    except _Problem as problem:
        raise TraceError(f"{path}: {problem}") from None
    return _ok_line(n_events, n_threads, relaxed, incomplete)


def _check_whole(path):
    """The checks on the whole trace in memory: (events, threads, relaxations, incomplete)."""
    trace = whole_file.load(path)
    _raise_if_cut(path, trace, len(trace.events))
    _check_top_level(trace.header, need_events=False)
    n_threads, relaxed = _check_events(trace)
    return len(trace.events), n_threads, relaxed, trace.incomplete


def _ok_line(n_events, n_threads, relaxed, incomplete):
    line = f"ok: {n_events} events, {n_threads} threads"
    if incomplete:
        allowed = []
        if relaxed.flows:
            plural = "s" if relaxed.flows != 1 else ""
            allowed.append(f"{relaxed.flows} flow{plural} missing one end")
        if relaxed.fqns:
            plural = "s" if relaxed.fqns != 1 else ""
            allowed.append(f"{relaxed.fqns} fqn{plural} whose module span is missing")
        line += " (incomplete trace" + (": allowed " + ", ".join(allowed) if allowed else "") + ")"
    return line


def _reworded(path, error):
    """The reader's error, reworded where validate says more than "cannot read" (which field is
    missing, where the JSON breaks)."""
    if isinstance(error, NotATrace):
        document = error.document
        if not isinstance(document, dict):
            return TraceError(
                f"{path}: the JSON is a {type(document).__name__}, expected an "
                "object with schemaVersion, distributedInfo and traceEvents"
            )
        try:
            _check_top_level(document, need_events=True)  # names what is missing
        except _Problem as problem:
            return TraceError(f"{path}: {problem}")
    elif isinstance(error, DamagedTrace):
        if error.header_cut:
            return TraceError(
                f"{path}: truncated inside the header line: the traced program "
                "stopped at start, there are no events to recover"
            )
        if error.json_error is not None:
            return TraceError(f"{path}: not valid JSON ({error.json_error})")
    return error


class _Problem(Exception):
    pass


def _check_top_level(header, need_events):
    if "schemaVersion" not in header:
        raise _Problem("no schemaVersion at the top level (fqntrace writes \"schemaVersion\": 1)")
    version = header["schemaVersion"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Problem(f"schemaVersion is {json.dumps(version)}, expected the number 1")
    if version != 1:
        raise _Problem(f"schemaVersion is {version}; this tool reads version 1 (upgrade fqntrace)")
    if need_events and not isinstance(header.get("traceEvents"), list):
        raise _Problem("traceEvents is missing or not a list")
    info = header.get("distributedInfo")
    if not isinstance(info, dict):
        raise _Problem("distributedInfo is missing or not an object (needs rank and world_size)")
    for key in ("rank", "world_size"):
        value = info.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Problem(f"distributedInfo.{key} is missing or not a whole number")
    if info["world_size"] < 1 or not 0 <= info["rank"] < info["world_size"]:
        raise _Problem(
            f"distributedInfo has rank {info['rank']} and world_size "
            f"{info['world_size']} (needs 0 <= rank < world_size)"
        )
    base = header.get("baseTimeNanoseconds")
    if base is not None and (not isinstance(base, int) or isinstance(base, bool) or base < 0):
        raise _Problem("baseTimeNanoseconds is not a whole number of nanoseconds >= 0")


def _where(trace, i, line=None):
    label = "traceEvents" if trace.format == tracestream.CHROME else "event"
    where = f"{label}[{i}]"
    lines = getattr(trace, "event_lines", None)
    if line is None and lines is not None and i < len(lines):
        line = lines[i]
    if line is not None:
        where += f" (line {line})"
    return where


def _describe_event(e):
    name = e.get("name")
    return f" {json.dumps(name, ensure_ascii=False)}" if isinstance(name, str) else ""


def _check_event(trace, i, e, line=None):
    if not isinstance(e, dict):
        raise _Problem(f"{_where(trace, i, line)} is not an object")
    ph = e.get("ph")
    if not isinstance(ph, str):
        raise _Problem(f"{_where(trace, i, line)} has no \"ph\"")

    def here():  # only when there is a problem to name: most events have none
        return _where(trace, i, line) + _describe_event(e)

    if ph == "X":
        if not isinstance(e.get("name"), str):
            raise _Problem(f"{here()}: X event without a name")
        for key in ("ts", "dur"):
            if not trace_events.is_number(e.get(key)):
                raise _Problem(f"{here()}: \"{key}\" is missing or not a number")
        if e["dur"] < 0:
            raise _Problem(f"{here()}: dur is negative ({e['dur']})")
        for key in ("pid", "tid"):
            if e.get(key) is None:
                raise _Problem(f"{here()}: \"{key}\" is missing")
        if e.get("cat") in ("cpu_op", "user_annotation", trace_events.MODULE_VIEW_CAT):
            args = e.get("args")
            if not isinstance(args, dict):
                raise _Problem(f"{here()}: {e['cat']} event without args")
            fqn = args.get("fqn")
            if not isinstance(fqn, str) or not fqn:
                raise _Problem(f"{here()}: args.fqn is missing or empty")
            if args.get("phase") not in PHASES:
                phase = json.dumps(args.get("phase"))
                raise _Problem(
                    f"{here()}: args.phase is {phase}, expected one of forward, backward, recompute"
                )
            if "module_type" in args and not isinstance(args["module_type"], str):
                raise _Problem(f"{here()}: args.module_type is not a string")
    elif ph in ("s", "f"):
        if e.get("id") is None:
            raise _Problem(f"{here()}: flow event without an id")
        if not trace_events.is_number(e.get("ts")):
            raise _Problem(f"{here()}: \"ts\" is missing or not a number")
        for key in ("pid", "tid"):
            if e.get(key) is None:
                raise _Problem(f"{here()}: \"{key}\" is missing")
    elif ph == "M":
        if not isinstance(e.get("name"), str):
            raise _Problem(f"{here()}: metadata event without a name")
        if e["name"] == trace_events.MODULE_ENTRY and trace_events.module_entry(e) is None:
            raise _Problem(
                f"{here()}: a module table entry needs args.fqn (not empty) and "
                "args.module_type, both strings"
            )


def _check_events(trace):
    """The per-event, nesting, flow and fqn checks; returns (threads, the Relaxations used)."""
    for i, e in enumerate(trace.events):
        _check_event(trace, i, e)
    index_of = {}
    slices = []
    for i, e in enumerate(trace.events):
        if e["ph"] == "X":
            index_of[len(slices)] = i
            slices.append(e)
    parents, overlap = trace_events.nest(slices)[:2]
    if overlap is not None:
        a, b = (slices[k] for k in overlap)

        def span(e):
            start = trace_events.to_ns(e["ts"])
            end = start + trace_events.to_ns(e["dur"])
            return f"{trace_events.format_us(start)}..{trace_events.format_us(end)} us"

        raise _Problem(
            f"slices on pid {a.get('pid')} tid {a.get('tid')} overlap without nesting: "
            f"{_where(trace, index_of[overlap[0]])}{_describe_event(a)} [{span(a)}] and "
            f"{_where(trace, index_of[overlap[1]])}{_describe_event(b)} [{span(b)}]"
        )

    incomplete = trace.incomplete
    loose_flows = 0
    flows = {}
    for i, e in enumerate(trace.events):
        if e["ph"] in ("s", "f"):
            key = (json.dumps(e.get("cat")), json.dumps(e["id"]))
            flows.setdefault(key, [0, 0, i])[0 if e["ph"] == "s" else 1] += 1
    for (cat, fid), (starts, finishes, first) in flows.items():
        if starts == 1 and finishes == 1:
            continue
        if incomplete and starts + finishes == 1:
            loose_flows += 1
            continue
        raise _Problem(
            f"flow id {fid} (cat {cat}, first at {_where(trace, first)}) has {starts} "
            f"\"s\" and {finishes} \"f\" events; each flow needs exactly one of each"
        )

    for k, e in enumerate(slices):
        parent = parents[k]
        # The module tracks' spans are a view whose depth is the fqn level (_StreamChecks._slice);
        # a trace that lost events (dropped, cut) may lack the range a depth counts.
        if (
            parent >= 0
            and not trace.incomplete
            and not trace_events.is_module_view(e)
            and not trace_events.is_module_view(slices[parent])
        ):
            _check_depth(trace, (index_of[k], None, e), (index_of[parent], None, slices[parent]))

    spans = {f for f in (trace_events.module_span_fqn(e) for e in slices) if f is not None}
    spans |= {
        entry[0] for entry in map(trace_events.module_entry, trace.events) if entry is not None
    }
    # Compiled code names submodules whose forward never ran as a module of its own (their
    # hooks were compiled away): names the kernels of compiled graphs carry are known, and in a
    # trace with compiled code so is any module below a module that ran (docs/compile.md).
    in_compiled = trace_events.CompiledCode(slices)
    spans |= {
        e["args"]["fqn"] for e in slices if e.get("cat") == "cpu_op" and in_compiled.contains(e)
    }
    missing = set()
    for k, e in enumerate(slices):
        if e.get("cat") != "cpu_op":
            continue
        fqn = e["args"]["fqn"]
        if fqn == "Global" or fqn in spans:
            continue
        if in_compiled and trace_events.has_ancestor_in(fqn, spans):
            continue
        if incomplete:
            missing.add(fqn)
            continue
        raise _Problem(
            f"{_where(trace, index_of[k])}{_describe_event(e)} has fqn "
            f"{json.dumps(fqn)} but the trace has no module span for it "
            f"(\"nn.Module: {fqn}\" with args.module_type)"
        )
    threads = {trace_events.thread_key(e) for e in slices}
    return len(threads), Relaxations(loose_flows, len(missing))


# ---------------------------------------------------------------------------------------------
# The same checks on a stream of events


class _NotPostOrder(Exception):
    """A thread's ranges are not in end order: check the file whole."""


def _span_text(e):
    start = trace_events.to_ns(e["ts"])
    end = start + trace_events.to_ns(e["dur"])
    return f"{trace_events.format_us(start)}..{trace_events.format_us(end)} us"


def _depth_of(e):
    args = e.get("args")
    depth = args.get("depth") if type(args) is dict else None
    return depth if type(depth) is int else None


def _check_depth(trace, child, parent):
    """child, parent: (index, line, event), parent the innermost slice enclosing child. args.depth
    is the number of the thread's slices that enclose an event: the child's is its parent's + 1."""
    depth, outer = _depth_of(child[2]), _depth_of(parent[2])
    if depth is None or outer is None or depth == outer + 1:
        return
    raise _Problem(
        f"{_where(trace, child[0], child[1])}{_describe_event(child[2])} has depth "
        f"{depth} but is nested {outer + 1} deep: inside "
        f"{_where(trace, parent[0], parent[1])}{_describe_event(parent[2])} at depth "
        f"{outer}"
    )


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


def _check_native(path):
    """The checks in the native engine: (events, threads, relaxations, incomplete) of a file
    they pass, else None (the Python checks judge it; nothing is said here). Raises _Problem for
    a cut file whose events pass."""
    try:
        stream = tracestream.TraceStream(path)
    except TraceError:
        return None  # the Python path says what is wrong with the file
    with stream:
        try:
            _check_top_level(stream.header, need_events=False)
        except _Problem:
            return None
        engine = summarize._native.Engine(stream.format == tracestream.JSONL, checks=True)

        def block(chunk, start, end):
            n = engine.feed_block(chunk, start, end)
            if n < -1:
                raise _NativeDeclined
            return None if n < 0 else n

        def event(e):  # the general path's events (another layout): one line each
            try:
                text = summarize_native.encode_event(e)
            except (TypeError, ValueError, UnicodeError, OverflowError):
                raise _NativeDeclined from None
            if engine.feed_event(text) < 0:
                raise _NativeDeclined

        try:
            stream.feed(block, event)
        except (_NativeDeclined, TraceError):
            return None
        if stream.cut:
            return (
                None
                if engine.check_result(True) is None
                else _raise_if_cut(path, stream, stream.events_read)
            )
        incomplete = stream.incomplete
        found = engine.check_result(incomplete)
        if found is None:
            return None
        n_threads, loose_flows, missing_fqns = found
        return stream.events_read, n_threads, Relaxations(loose_flows, missing_fqns), incomplete


class _NativeDeclined(Exception):
    """The native checks found something: the Python checks read the file and name it."""


def _raise_if_cut(path, trace, n_events):
    """A cut trace (a stream or a loaded Trace) is reported as cut, whatever else is wrong."""
    if not trace.cut:
        return
    if trace.format == tracestream.JSONL:
        what = "its last line is partial" if trace.dropped_partial else "no footer line"
    else:
        what = "no closing tail"
    raise _Problem(f"truncated ({what}; {n_events} complete events); " + repair_hint(path))
