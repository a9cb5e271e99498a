"""Per-module aggregation of a trace: the summary dict `python -m fqntrace summary` prints as a
table (fqntrace.table) or as JSON.

Rules (the same as the C++ summary exporter, so `summary --json` and <stem>.summary.json agree):

* Only *top-level* cpu_ops carry time: a cpu_op (op, autograd node or engine wrapper) that no
  other cpu_op on its thread encloses. Module spans and record_function ranges do not hide an op,
  so a cpu_op inside a module span is still top-level; an op inside another op is not counted
  again. Summed, these times never count a nanosecond twice.
* Phase boundaries: a cpu_op whose phase differs from the nearest cpu_op around it (a forward
  re-run by activation checkpointing inside a backward node: recompute) also carries time, for
  its own fqn and phase, and that time is taken out of the enclosing counted op's.
* SELF time of a module and phase: top-level ops whose args.fqn is exactly that module.
  TOTAL time: the same for the module and every descendant fqn ("fqn." prefix).
* ops: operators (cpu_ops that are neither autograd nodes nor engine wrappers, i.e. without
  "Fwd thread id"), at any nesting level; self_ops / ops as for time.
* calls: forward module spans of that fqn (recompute spans are not calls).
* step_ms: all top-level op time of the trace (every module, Global included, all phases).
* Backend work ranges of collectives (args.async_work) run beside the training thread: they are
  reported as comm_ms and never added to op time.

Steps (fqntrace.steps): when the trace has ``ProfilerStep#N`` ranges, the summary adds a
``steps`` object and, per module and phase, ``step_median_ms`` / ``step_self_median_ms``: the
median over steps of the module's time in each step. Step 0 is left out of the medians by
default: it carries the one-time costs (first calls, the optimizer's state allocated at its first
step, compilation, caches warming up, and everything from the session's start to the first
step), which would otherwise stand for the steady state with few steps.
"""
import json

from fqntrace import steps, traceio
from fqntrace.traceio import PHASES, TraceError

TOP_OPS = 5
ENGINE_WRAPPER = "autograd::engine::evaluate_function:"


def _new_phase():
    return {"self_ns": 0, "self_ops": 0, "self_flops": 0, "comm_ns": 0, "comm_bytes": 0,
            "collectives": 0, "top": {}}


def _ms(ns):
    return round(ns / 1e6, 6)


def summarize(trace, exclude_steps=steps.DEFAULT_EXCLUDED):
    """The summary of a loaded trace (traceio.Trace) in the JSON shape of <stem>.summary.json.
    `exclude_steps`: step numbers left out of the per-step medians (a set; default {0})."""
    slices = []
    for e in trace.slices():
        args = e.get("args")
        if (traceio.is_number(e.get("ts")) and traceio.is_number(e.get("dur")) and e["dur"] >= 0
                and isinstance(args, dict) and isinstance(args.get("fqn"), str)):
            slices.append(e)
    parents, _, starts, ends = traceio.nest(slices)
    is_op = [e.get("cat") == "cpu_op" for e in slices]
    in_op = [None] * len(slices)  # this slice or an enclosing one is a cpu_op
    for i in range(len(slices)):
        chain = []
        j = i
        while j >= 0 and in_op[j] is None:
            chain.append(j)
            j = parents[j]
        inherited = in_op[j] if j >= 0 else False
        for k in reversed(chain):
            inherited = inherited or is_op[k]
            in_op[k] = inherited

    # The nearest enclosing cpu_op of each slice, and which slices carry time ("counted").
    op_parent = [-1] * len(slices)
    for i in range(len(slices)):
        j = parents[i]
        while j >= 0 and not is_op[j]:
            j = parents[j]
        op_parent[i] = j

    def owner_of(k):
        args = slices[k]["args"]
        return args.get("phase"), args.get("fqn")

    # As the observer's kPhaseTop: an op whose phase or module differs from the op around it
    # (recompute inside a backward node, a compiled graph's kernel inside CompiledFunction) has
    # time of its own.
    counted = [is_op[i] and (op_parent[i] < 0 or owner_of(op_parent[i]) != owner_of(i))
               for i in range(len(slices))]
    excluded = [0] * len(slices)  # time of counted slices nested in a counted slice
    for i in range(len(slices)):
        if counted[i] and op_parent[i] >= 0:
            j = op_parent[i]
            while j >= 0 and not counted[j]:
                j = op_parent[j]
            if j >= 0:
                excluded[j] += ends[i] - starts[i]

    modules = {}
    first_seen = {}
    step_times = steps.StepTimes(slices, starts, ends)

    def module(fqn):
        m = modules.get(fqn)
        if m is None:
            m = modules[fqn] = {"module_type": "", "calls": 0,
                                "phases": {p: _new_phase() for p in PHASES}}
        return m

    for i, e in enumerate(slices):
        args = e["args"]
        fqn = args["fqn"]
        start = starts[i]
        m = modules.get(fqn)
        if m is None:
            m = module(fqn)
            first_seen[fqn] = start
        elif start < first_seen[fqn]:
            first_seen[fqn] = start
        phase = args.get("phase")
        if not is_op[i] and e.get("cat") == "user_annotation" and "module_type" in args:
            if not m["module_type"] and isinstance(args.get("module_type"), str):
                m["module_type"] = args["module_type"]
            if phase == "forward":
                m["calls"] += 1
            continue
        if phase not in PHASES or not is_op[i]:
            continue  # record_function ranges carry no time of their own
        p = m["phases"][phase]
        dur = ends[i] - start
        if args.get("async_work"):
            p["comm_ns"] += dur
            continue
        if "collective" in args:
            p["collectives"] += 1
            if isinstance(args.get("bytes"), int):
                p["comm_bytes"] += args["bytes"]
        elif isinstance(args.get("flops"), int):
            p["self_flops"] += args["flops"]
        name = e.get("name")
        if not isinstance(name, str):
            name = "?"
        if "Fwd thread id" not in args and not name.startswith(ENGINE_WRAPPER):
            p["self_ops"] += 1  # an operator, not an autograd node or the engine's wrapper
        if counted[i]:
            dur = max(dur - excluded[i], 0)
            p["self_ns"] += dur
            step_times.add(e, start, fqn, phase, dur)
            top = p["top"].get(name)
            if top is None:
                top = p["top"][name] = [0, 0]
            top[0] += dur
            top[1] += 1

    # Containers that never run a forward of their own (a ModuleList) still get a row, as in
    # the C++ summary exporter, so every level of the tree has its total.
    for fqn in list(modules):
        parts = fqn.split(".")
        for k in range(1, len(parts)):
            ancestor = ".".join(parts[:k])
            if ancestor not in modules:
                module(ancestor)
                first_seen[ancestor] = first_seen.get(fqn, 0)
            else:
                first_seen[ancestor] = min(first_seen.get(ancestor, 0), first_seen.get(fqn, 0))
    order = sorted(modules, key=lambda f: (f == "Global", first_seen.get(f, 0), f))
    step_ns = sum(p["self_ns"] for m in modules.values() for p in m["phases"].values())
    out_modules = {}
    for fqn in order:
        m = modules[fqn]
        subtree = [modules[f] for f in modules if f == fqn or f.startswith(fqn + ".")]
        entry = {"module_type": m["module_type"], "calls": m["calls"]}
        for phase in PHASES:
            p = m["phases"][phase]
            below = [s["phases"][phase] for s in subtree]
            tops = sorted(p["top"].items(), key=lambda kv: (-kv[1][0], kv[0]))[:TOP_OPS]
            entry[phase] = {
                "total_ms": _ms(sum(s["self_ns"] for s in below)),
                "self_ms": _ms(p["self_ns"]),
                "ops": sum(s["self_ops"] for s in below),
                "self_ops": p["self_ops"],
                "flops": sum(s["self_flops"] for s in below),
                "self_flops": p["self_flops"],
                "comm_ms": _ms(p["comm_ns"]),
                "comm_bytes": p["comm_bytes"],
                "collectives": p["collectives"],
                "top_ops": [{"name": name, "ms": _ms(ns), "count": count}
                            for name, (ns, count) in tops],
            }
        out_modules[fqn] = entry
    step_summary = step_times.summary(exclude_steps, out_modules)
    tail = trace.tail if isinstance(trace.tail, dict) else {}
    out = {
        "trace": trace.header.get("traceName", trace.path),
        "rank": trace.rank,
        "step_ms": _ms(step_ns),
        "dropped_events": tail.get("dropped_events", 0),
        "complete": not trace.incomplete,
        "modules": out_modules,
    }
    if step_summary is not None:
        out["steps"] = step_summary
    merged = trace.header.get("ranks")
    if isinstance(merged, list):  # a merged trace: every rank's time is added up
        out["rank"] = None
        out["ranks"] = [r.get("rank") for r in merged if isinstance(r, dict)]
    return out


def is_summary_path(path):
    return path.lower().endswith(".summary.json")


def load_summary(path, text=None):
    """A summary file (the JSON shape above). Raises TraceError."""
    if text is None:
        text = traceio.read_text(path)
    try:
        obj = json.loads(text)
    except ValueError as error:
        detail = traceio.describe_json_error(error)
        raise TraceError(f"{path}: not valid JSON ({detail}); a .summary.json "
                         "is written whole at exit, so this one is damaged or was cut off"
                         ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("modules"), dict):
        raise TraceError(f"{path}: not a summary (no \"modules\" object); "
                         "pass the trace (.json / .jsonl) instead")
    for fqn, entry in obj["modules"].items():
        if not isinstance(entry, dict):
            raise TraceError(f"{path}: module {fqn!r} is not an object; not an fqntrace summary")
    return obj


def filter_depth(summary, depth):
    if depth is None:
        return summary
    out = dict(summary)
    out["modules"] = {f: m for f, m in summary["modules"].items() if traceio.fqn_depth(f) <= depth}
    return out


def load_for_summary(path, note=lambda message: None, exclude_steps=steps.DEFAULT_EXCLUDED):
    """A summary dict from a trace (.json / .jsonl, cut-off ones too) or a .summary.json.
    `note(message)` hears about a cut-off trace summarized as far as it goes."""
    if is_summary_path(path):
        return load_summary(path)
    text = traceio.read_text(path)
    try:
        trace = traceio.parse(path, text)
    except TraceError:
        # A summary under another name (`summary --json > out.json`) is read as one.
        try:
            return load_summary(path, text)
        except TraceError:
            pass
        raise
    if trace.cut:
        partial = " (dropped a partial last line)" if trace.dropped_partial else ""
        note(f"{path} is cut off (no closing tail); summarizing its {len(trace.events)} complete "
             f"events{partial}; {traceio.repair_hint(path)} to close the file")
    return summarize(trace, exclude_steps)
