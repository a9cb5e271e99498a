"""`python -m fqntrace <verb>`: read fqntrace's trace files (no torch, standard library only).

    summary TRACE        per-module table (forward / backward / recompute time, %, ops, calls)
    validate TRACE       check the format; print the first problem
    repair TRACE         close a trace cut off by a crash
    merge TRACE... -o F  one trace from several ranks' traces

Every failure is one line on stderr, `fqntrace: <what is wrong and what to do>`, and a non-zero
exit code (1: the file or the operation failed, 2: bad arguments).
"""
import argparse
import json
import os
import sys

from fqntrace import summarize as summarize_mod
from fqntrace import traceio
from fqntrace.traceio import PHASES, TraceError

PROG = "python -m fqntrace"
REPAIR_HINT = "run: python -m fqntrace repair {path}"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message}; see: {self.prog} --help")


def _err(message):
    sys.stderr.write("fqntrace: " + " ".join(str(message).split("\n")) + "\n")


def _note(message):
    _err("note: " + message)


def _depth(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


# ---------------------------------------------------------------------------------------------
# summary


def _load_for_summary(path):
    """A summary dict from a trace (.json / .jsonl, cut-off ones too) or a .summary.json."""
    if summarize_mod.is_summary_path(path):
        return summarize_mod.load_summary(path)
    text = traceio.read_text(path)
    try:
        trace = traceio.parse(path, text)
    except TraceError:
        # A summary under another name (`summary --json > out.json`) is read as one.
        try:
            return summarize_mod.load_summary(path, text)
        except TraceError:
            pass
        raise
    if trace.cut:
        partial = " (dropped a partial last line)" if trace.dropped_partial else ""
        _note(f"{path} is cut off (no closing tail); summarizing its {len(trace.events)} complete "
              f"events{partial}; {REPAIR_HINT.format(path=path)} to close the file")
    return summarize_mod.summarize(trace)


def cmd_summary(args):
    summary = _load_for_summary(args.trace)
    if args.json:
        sys.stdout.write(json.dumps(summarize_mod.filter_depth(summary, args.depth), indent=2,
                                    ensure_ascii=False) + "\n")
        return 0
    lines = summarize_mod.render_table(summary, depth=args.depth, sort=args.sort, phase=args.phase)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# validate


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
        if e.get("cat") in ("cpu_op", "user_annotation"):
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
    """The per-event, nesting, flow and fqn checks; returns the relaxations used (incomplete)."""
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
    relaxed = {"flows": 0, "fqns": 0}
    flows = {}
    for i, e in enumerate(trace.events):
        if e["ph"] in ("s", "f"):
            key = (json.dumps(e.get("cat")), json.dumps(e["id"]))
            flows.setdefault(key, [0, 0, i])[0 if e["ph"] == "s" else 1] += 1
    for (cat, fid), (starts, finishes, first) in flows.items():
        if starts == 1 and finishes == 1:
            continue
        if incomplete and starts + finishes == 1:
            relaxed["flows"] += 1
            continue
        raise _Problem(f"flow id {fid} (cat {cat}, first at {_where(trace, first)}) has {starts} "
                       f"\"s\" and {finishes} \"f\" events; each flow needs exactly one of each")

    spans = {f for f in (traceio.module_span_fqn(e) for e in slices) if f is not None}
    # Kernels of compiled graphs name submodules whose forward never ran as a module: those
    # names are known too (and so are their parameters' gradient accumulations).
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
        if incomplete:
            missing.add(fqn)
            continue
        raise _Problem(f"{_where(trace, index_of[k])}{_describe_event(e)} has fqn "
                       f"{json.dumps(fqn)} but the trace has no module span for it "
                       f"(\"nn.Module: {fqn}\" with args.module_type)")
    relaxed["fqns"] = len(missing)
    threads = {traceio.thread_key(e) for e in slices}
    return len(threads), relaxed


def _standard_chrome_lines(text, n_events):
    """Line numbers of the events when the file has the core's one-event-per-line layout."""
    match = traceio.TRACE_EVENTS_KEY.search(text)
    if match is None:
        return None
    first = traceio.line_of(text, match.end()) + 1
    if text.rstrip().count("\n") != first - 1 + n_events:
        return None
    return list(range(first, first + n_events))


def _cut_in_header(text):
    stripped = text.strip()
    return stripped.startswith('{"schemaVersion"') and "\n" not in stripped


def validate_file(path):
    """The success line for a valid trace; raises TraceError with the first problem."""
    text = traceio.read_text(path)
    if not text.strip():
        raise TraceError(f"{path}: empty file (the traced program wrote nothing)")
    try:
        if traceio.detect_format(path, text) == traceio.JSONL:
            trace = traceio.parse_jsonl(path, text)
            if trace.cut:
                what = "its last line is partial" if trace.dropped_partial else "no footer line"
                raise _Problem(f"truncated ({what}; {len(trace.events)} complete events); "
                               + REPAIR_HINT.format(path=path))
            _check_top_level(trace.header, need_events=False)
        else:
            try:
                obj = json.loads(text)
            except ValueError as error:
                try:
                    cut = traceio.parse_cut_chrome(path, text, error)
                except TraceError:
                    if _cut_in_header(text):
                        raise _Problem("truncated inside the header line: the traced program "
                                       "stopped at start, there are no events to recover") from None
                    detail = traceio.describe_json_error(error)
                    raise _Problem(f"not valid JSON ({detail})") from None
                raise _Problem(f"truncated (no closing tail; {len(cut.events)} complete events); "
                               + REPAIR_HINT.format(path=path)) from None
            if not isinstance(obj, dict):
                raise _Problem(f"the JSON is a {type(obj).__name__}, expected an object with "
                               "schemaVersion, distributedInfo and traceEvents")
            _check_top_level(obj, need_events=True)
            tail = obj.get("fqntrace")
            trace = traceio.Trace(path, traceio.CHROME,
                                  {k: v for k, v in obj.items() if k != "traceEvents"},
                                  obj["traceEvents"], tail if isinstance(tail, dict) else {})
            trace.event_lines = _standard_chrome_lines(text, len(trace.events))
        n_threads, relaxed = _check_events(trace)
    except _Problem as problem:
        raise TraceError(f"{path}: {problem}") from None
    line = f"ok: {len(trace.events)} events, {n_threads} threads"
    if trace.incomplete:
        allowed = []
        flows, fqns = relaxed["flows"], relaxed["fqns"]
        if flows:
            allowed.append(f"{flows} flow{'s' if flows != 1 else ''} missing one end")
        if fqns:
            allowed.append(f"{fqns} fqn{'s' if fqns != 1 else ''} whose module span is missing")
        line += " (incomplete trace" + (": allowed " + ", ".join(allowed) if allowed else "") + ")"
    return line


def cmd_validate(args):
    print(validate_file(args.trace))
    return 0


# ---------------------------------------------------------------------------------------------
# repair


def cmd_repair(args):
    path = args.trace
    text = traceio.read_text(path)
    trace = traceio.parse(path, text)
    if not trace.cut:
        extra = f" (nothing written to {args.output})" if args.output else ""
        print(f"already complete: {len(trace.events)} events{extra}")
        return 0
    target = args.output or path
    traceio.write_atomic(target, traceio.repaired_text(trace, text), like=path)
    dropped = "dropped 1 partial line" if trace.dropped_partial else "no partial line"
    wrote = f"; wrote {target}" if args.output else ""
    print(f"repaired: kept {len(trace.events)} events ({dropped}){wrote}")
    return 0


# ---------------------------------------------------------------------------------------------
# merge


_PROCESS_METADATA = ("process_name", "process_labels", "process_sort_index")


def merge_traces(paths, output):
    """Merges per-rank traces into output; returns (ranks, events written)."""
    if str(output).lower().endswith(".jsonl"):
        raise TraceError(f"{output}: merge writes a Chrome trace; name the output .json")
    loaded = []
    for path in paths:
        trace = traceio.load(path)
        if trace.cut:
            _note(f"{path} is cut off; merging its {len(trace.events)} complete events "
                  "(repaired in memory, the file is left as it is)")
        rank = trace.rank
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise TraceError(f"{path}: no distributedInfo.rank; merge needs each input's rank")
        base = trace.header.get("baseTimeNanoseconds")
        if not isinstance(base, int) or isinstance(base, bool):
            raise TraceError(f"{path}: no baseTimeNanoseconds; merge needs it to align the "
                             "ranks' clocks")
        loaded.append((rank, path, base, trace))
    seen = {}
    for rank, path, _, _ in loaded:
        if rank in seen:
            raise TraceError(f"{seen[rank]} and {path} are both rank {rank} "
                             "(distributedInfo.rank); merge takes one trace per rank")
        seen[rank] = path
    loaded.sort(key=lambda item: item[0])
    base_min = min(base for _, _, base, _ in loaded)

    events = []
    flow_ids = {}
    n_slices = 0
    for k, (rank, path, base, trace) in enumerate(loaded):
        shift = base - base_min
        pids = sorted({str(e["pid"]) for e in trace.events if isinstance(e, dict) and "pid" in e})
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                       "args": {"name": f"rank {rank}"}})
        label = f"rank {rank}, {os.path.basename(path)}"
        if pids:
            label += ", pid " + " ".join(pids)
        events.append({"ph": "M", "name": "process_labels", "pid": rank, "tid": 0,
                       "args": {"labels": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                       "args": {"sort_index": rank}})
        for e in trace.events:
            if not isinstance(e, dict):
                continue
            ph = e.get("ph")
            if ph == "M" and e.get("name") in _PROCESS_METADATA:
                continue  # replaced by the rank's own rows
            out = dict(e)
            if "pid" in out or ph != "M":
                out["pid"] = rank
            if traceio.is_number(out.get("ts")):
                out["ts"] = traceio.Micros(traceio.to_ns(out["ts"]) + shift)
            if traceio.is_number(out.get("dur")):
                out["dur"] = traceio.Micros(traceio.to_ns(out["dur"]))
            if ph in ("s", "t", "f") and "id" in out:
                key = (k, json.dumps(out.get("cat")), json.dumps(out["id"]))
                out["id"] = flow_ids.setdefault(key, len(flow_ids) + 1)
            if ph == "X":
                n_slices += 1
            events.append(out)

    world = max([rank + 1 for rank, _, _, _ in loaded] +
                [t.header.get("distributedInfo", {}).get("world_size", 0) for _, _, _, t in loaded
                 if isinstance(t.header.get("distributedInfo", {}).get("world_size"), int)])
    info = {}
    backends = {t.header.get("distributedInfo", {}).get("backend") for _, _, _, t in loaded}
    if len(backends) == 1 and isinstance(next(iter(backends)), str):
        info["backend"] = next(iter(backends))
    info.update({"rank": 0, "world_size": world})
    header = {
        "schemaVersion": 1,
        "distributedInfo": info,
        "baseTimeNanoseconds": base_min,
        "displayTimeUnit": "ms",
        "traceName": "merged: " + ", ".join(os.path.basename(p) for _, p, _, _ in loaded),
        "ranks": [{"rank": rank, "file": path, "baseTimeNanoseconds": base,
                   "complete": not trace.incomplete} for rank, path, base, trace in loaded],
    }
    dropped = 0
    for _, _, _, trace in loaded:
        value = trace.tail.get("dropped_events") if isinstance(trace.tail, dict) else None
        dropped += value if isinstance(value, int) else 0
    tail = {"events": n_slices, "dropped_events": dropped,
            "complete": all(not t.incomplete for _, _, _, t in loaded), "merged": True}
    if any(t.cut or (isinstance(t.tail, dict) and t.tail.get("repaired")) for _, _, _, t in loaded):
        tail["repaired"] = True
    traceio.write_atomic(output, traceio.chrome_text(header, events, tail))
    return len(loaded), len(events)


def cmd_merge(args):
    ranks, n_events = merge_traces(args.traces, args.output)
    print(f"merged: {ranks} ranks, {n_events} events -> {args.output}")
    return 0


# ---------------------------------------------------------------------------------------------


def build_parser():
    parser = _Parser(prog=PROG, description="Read fqntrace traces: per-module summary, format "
                     "check, repair of a cut-off trace, merge of per-rank traces. No torch needed.")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True,
                                  parser_class=_Parser)

    p = verbs.add_parser("summary", help="per-module table of forward / backward / recompute time",
                         description="Per-module table: op time of each module and its submodules "
                         "per phase, its share of all op time, op count and forward calls. Reads "
                         ".json and .jsonl traces (a cut-off one is repaired in memory) and "
                         ".summary.json files.")
    p.add_argument("trace", metavar="TRACE", help="a trace (.json, .jsonl) or a .summary.json")
    p.add_argument("--depth", type=_depth, metavar="N",
                   help="only modules at most N levels below the root (root = 0)")
    p.add_argument("--sort", choices=["tree", "fwd", "bwd", "total"], default=None,
                   help="order of sibling modules: tree (execution order, the default), or by "
                   "forward, backward or total time, largest first")
    p.add_argument("--phase", choices=list(PHASES),
                   help="show only this phase's time (and order siblings by it)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (the .summary.json shape) instead of a table")
    p.set_defaults(func=cmd_summary)

    p = verbs.add_parser("validate", help="check a trace and print its first problem",
                         description="Checks JSON, top-level fields, every event, nesting per "
                         "thread, flow pairs and that every op's fqn has a module span; prints "
                         "the first problem (exit 1) or 'ok: N events, M threads'.")
    p.add_argument("trace", metavar="TRACE")
    p.set_defaults(func=cmd_validate)

    p = verbs.add_parser("repair", help="close a trace cut off by a crash",
                         description="Keeps every complete event, drops a partial last line and "
                         "closes the file (tail marked complete: false, repaired: true). Writes "
                         "in place unless -o is given; a complete file is left untouched.")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", help="write the repaired trace here")
    p.set_defaults(func=cmd_repair)

    p = verbs.add_parser("merge", help="merge per-rank traces into one",
                         description="One Chrome trace from several ranks' traces: one process "
                         "row per rank (pid = rank), timestamps on the earliest clock base, flow "
                         "ids made unique. Cut-off inputs are repaired in memory.")
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="the merged trace (.json)")
    p.set_defaults(func=cmd_merge)
    return parser


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except UsageError as error:
        _err(error)
        return 2
    except TraceError as error:
        _err(error)
        return 1
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BrokenPipeError:
        # The reader went away (`... | head`): stay quiet, also when Python flushes at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except MemoryError:
        _err("out of memory while reading the trace; use a machine with more memory")
        return 1
    except Exception as error:  # never a traceback for the user
        _err(f"internal error ({type(error).__name__}: {error}); please report it with the command "
             "and the trace file")
        return 1
