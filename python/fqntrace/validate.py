"""`python -m fqntrace validate`: checks a trace read by traceio and names its first problem.

The checks, in order: the file reads as a trace (not cut off), the top-level fields, every event,
nesting per thread, flow pairs, and a module span for every op's fqn. An incomplete trace (cut,
repaired, or with dropped events) may lack one end of a flow or the span of an fqn; those are
counted instead of reported.
"""
import json
from typing import NamedTuple

from fqntrace import traceio
from fqntrace.traceio import PHASES, TraceError


class Relaxations(NamedTuple):
    """What an incomplete trace was allowed to lack."""
    flows: int  # flows missing one end
    fqns: int   # fqns whose module span is missing


def validate_file(path):
    """The success line for a valid trace; raises TraceError with the first problem."""
    text = traceio.read_text(path)
    if not text.strip():
        raise TraceError(f"{path}: empty file (the traced program wrote nothing)")
    try:
        trace = _read(path, text)
        n_threads, relaxed = _check_events(trace)
    except _Problem as problem:
        raise TraceError(f"{path}: {problem}") from None
    line = f"ok: {len(trace.events)} events, {n_threads} threads"
    if trace.incomplete:
        allowed = []
        if relaxed.flows:
            plural = "s" if relaxed.flows != 1 else ""
            allowed.append(f"{relaxed.flows} flow{plural} missing one end")
        if relaxed.fqns:
            plural = "s" if relaxed.fqns != 1 else ""
            allowed.append(f"{relaxed.fqns} fqn{plural} whose module span is missing")
        line += " (incomplete trace" + (": allowed " + ", ".join(allowed) if allowed else "") + ")"
    return line


def _read(path, text):
    """The trace, complete, with its top level checked. The reader's errors are reworded where
    validate says more than "cannot read" (which field is missing, where the JSON breaks)."""
    try:
        trace = traceio.parse(path, text)
    except traceio.NotATrace as error:
        document = error.document
        if not isinstance(document, dict):
            raise _Problem(f"the JSON is a {type(document).__name__}, expected an object with "
                           "schemaVersion, distributedInfo and traceEvents") from None
        _check_top_level(document, need_events=True)  # names what is missing
        raise  # not reached: a trace object without a traceEvents list fails the check above
    except traceio.DamagedTrace as damage:
        if _cut_in_header(text):
            raise _Problem("truncated inside the header line: the traced program "
                           "stopped at start, there are no events to recover") from None
        json_error = damage.json_error or traceio.first_json_error(text)
        raise _Problem(f"not valid JSON ({traceio.describe_json_error(json_error)})") from None
    if trace.cut:
        if trace.format == traceio.JSONL:
            what = "its last line is partial" if trace.dropped_partial else "no footer line"
        else:
            what = "no closing tail"
        raise _Problem(f"truncated ({what}; {len(trace.events)} complete events); "
                       + traceio.repair_hint(path))
    _check_top_level(trace.header, need_events=False)
    if trace.event_lines is None:
        trace.event_lines = traceio.standard_chrome_lines(text, len(trace.events))
    return trace


def _cut_in_header(text):
    stripped = text.strip()
    return stripped.startswith('{"schemaVersion"') and "\n" not in stripped


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
        raise _Problem(f"distributedInfo has rank {info['rank']} and world_size "
                       f"{info['world_size']} (needs 0 <= rank < world_size)")
    base = header.get("baseTimeNanoseconds")
    if base is not None and (not isinstance(base, int) or isinstance(base, bool) or base < 0):
        raise _Problem("baseTimeNanoseconds is not a whole number of nanoseconds >= 0")


def _where(trace, i):
    label = "traceEvents" if trace.format == traceio.CHROME else "event"
    where = f"{label}[{i}]"
    if trace.event_lines is not None and i < len(trace.event_lines):
        where += f" (line {trace.event_lines[i]})"
    return where


def _describe_event(e):
    name = e.get("name")
    return f" {json.dumps(name, ensure_ascii=False)}" if isinstance(name, str) else ""


def _check_event(trace, i, e):
    if not isinstance(e, dict):
        raise _Problem(f"{_where(trace, i)} is not an object")
    ph = e.get("ph")
    if not isinstance(ph, str):
        raise _Problem(f"{_where(trace, i)} has no \"ph\"")
    here = _where(trace, i) + _describe_event(e)
    if ph == "X":
        if not isinstance(e.get("name"), str):
            raise _Problem(f"{here}: X event without a name")
        for key in ("ts", "dur"):
            if not traceio.is_number(e.get(key)):
                raise _Problem(f"{here}: \"{key}\" is missing or not a number")
        if e["dur"] < 0:
            raise _Problem(f"{here}: dur is negative ({e['dur']})")
        for key in ("pid", "tid"):
            if e.get(key) is None:
                raise _Problem(f"{here}: \"{key}\" is missing")
        if e.get("cat") in ("cpu_op", "user_annotation", traceio.MODULE_VIEW_CAT):
            args = e.get("args")
            if not isinstance(args, dict):
                raise _Problem(f"{here}: {e['cat']} event without args")
            fqn = args.get("fqn")
            if not isinstance(fqn, str) or not fqn:
                raise _Problem(f"{here}: args.fqn is missing or empty")
            if args.get("phase") not in PHASES:
                phase = json.dumps(args.get("phase"))
                raise _Problem(f"{here}: args.phase is {phase}, expected one of forward, "
                               "backward, recompute")
            if "module_type" in args and not isinstance(args["module_type"], str):
                raise _Problem(f"{here}: args.module_type is not a string")
    elif ph in ("s", "f"):
        if e.get("id") is None:
            raise _Problem(f"{here}: flow event without an id")
        if not traceio.is_number(e.get("ts")):
            raise _Problem(f"{here}: \"ts\" is missing or not a number")
        for key in ("pid", "tid"):
            if e.get(key) is None:
                raise _Problem(f"{here}: \"{key}\" is missing")
    elif ph == "M":
        if not isinstance(e.get("name"), str):
            raise _Problem(f"{here}: metadata event without a name")


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
    overlap = traceio.nest(slices)[1]
    if overlap is not None:
        a, b = (slices[k] for k in overlap)

        def span(e):
            start = traceio.to_ns(e["ts"])
            end = start + traceio.to_ns(e["dur"])
            return f"{traceio.format_us(start)}..{traceio.format_us(end)} us"

        raise _Problem(f"slices on pid {a.get('pid')} tid {a.get('tid')} overlap without nesting: "
                       f"{_where(trace, index_of[overlap[0]])}{_describe_event(a)} [{span(a)}] and "
                       f"{_where(trace, index_of[overlap[1]])}{_describe_event(b)} [{span(b)}]")

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
        raise _Problem(f"flow id {fid} (cat {cat}, first at {_where(trace, first)}) has {starts} "
                       f"\"s\" and {finishes} \"f\" events; each flow needs exactly one of each")

    spans = {f for f in (traceio.module_span_fqn(e) for e in slices) if f is not None}
    # Compiled code names submodules whose forward never ran as a module of its own (their
    # hooks were compiled away): names the kernels of compiled graphs carry are known, and in a
    # trace with compiled code so is any module below a module that ran (docs/compile.md).
    in_compiled = traceio.CompiledCode(slices)
    spans |= {e["args"]["fqn"] for e in slices
              if e.get("cat") == "cpu_op" and in_compiled.contains(e)}
    missing = set()
    for k, e in enumerate(slices):
        if e.get("cat") != "cpu_op":
            continue
        fqn = e["args"]["fqn"]
        if fqn == "Global" or fqn in spans:
            continue
        if in_compiled and traceio.has_ancestor_in(fqn, spans):
            continue
        if incomplete:
            missing.add(fqn)
            continue
        raise _Problem(f"{_where(trace, index_of[k])}{_describe_event(e)} has fqn "
                       f"{json.dumps(fqn)} but the trace has no module span for it "
                       f"(\"nn.Module: {fqn}\" with args.module_type)")
    threads = {traceio.thread_key(e) for e in slices}
    return len(threads), Relaxations(loose_flows, len(missing))
