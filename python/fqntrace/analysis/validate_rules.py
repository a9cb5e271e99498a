"""What a valid trace is, one rule at a time, and how a problem is said: the top-level fields,
an event's fields, args.depth against nesting, a cut file; the wording of where an event is. Both
of validate's readers use them (validate.py over a loaded trace, validate_stream.py over a
stream).
"""

import json
from typing import NamedTuple

from fqntrace.analysis import trace_events, trace_format
from fqntrace.analysis.errors import repair_hint
from fqntrace.analysis.trace_events import PHASES


class Relaxations(NamedTuple):
    """What an incomplete trace was allowed to lack."""

    flows: int  # flows missing one end
    fqns: int  # fqns whose module span is missing


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
    label = "traceEvents" if trace.format == trace_format.CHROME else "event"
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


def _raise_if_cut(path, trace, n_events):
    """A cut trace (a stream or a loaded Trace) is reported as cut, whatever else is wrong."""
    if not trace.cut:
        return
    if trace.format == trace_format.JSONL:
        what = "its last line is partial" if trace.dropped_partial else "no footer line"
    else:
        what = "no closing tail"
    raise _Problem(f"truncated ({what}; {n_events} complete events); " + repair_hint(path))
