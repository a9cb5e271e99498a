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

import json

from fqntrace.analysis import (
    summarize,
    summarize_native,
    trace_events,
    trace_format,
    tracestream,
    whole_file,
)
from fqntrace.analysis.errors import DamagedTrace, NotATrace, TraceError
from fqntrace.analysis.validate_rules import (
    Relaxations,
    _check_depth,
    _check_event,
    _check_top_level,
    _describe_event,
    _Problem,
    _raise_if_cut,
    _where,
)
from fqntrace.analysis.validate_stream import _check_stream, _NotPostOrder


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
        engine = summarize._native.Engine(stream.format == trace_format.JSONL, checks=True)

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
