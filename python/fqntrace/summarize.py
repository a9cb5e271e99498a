"""Per-module aggregation of a trace, and the table `python -m fqntrace summary` prints.

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
"""
import json
import os
import re
import sys

from fqntrace import traceio
from fqntrace.traceio import PHASES, TraceError

PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "recomp"}
TOP_OPS = 5
ENGINE_WRAPPER = "autograd::engine::evaluate_function:"
TABLE_WIDTH = 100


def _new_phase():
    return {"self_ns": 0, "self_ops": 0, "self_flops": 0, "comm_ns": 0, "comm_bytes": 0,
            "collectives": 0, "top": {}}


def _ms(ns):
    return round(ns / 1e6, 6)


def summarize(trace):
    """The summary of a loaded trace (traceio.Trace) in the JSON shape of <stem>.summary.json."""
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
    tail = trace.tail if isinstance(trace.tail, dict) else {}
    out = {
        "trace": trace.header.get("traceName", trace.path),
        "rank": trace.rank,
        "step_ms": _ms(step_ns),
        "dropped_events": tail.get("dropped_events", 0),
        "complete": not trace.incomplete,
        "modules": out_modules,
    }
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


# ---------------------------------------------------------------------------------------------
# The table


def _natural_key(fqn):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", fqn)]


class _Node:
    __slots__ = ("fqn", "entry", "children", "depth")

    def __init__(self, fqn, entry):
        self.fqn = fqn
        self.entry = entry  # None: a path that only exists as a parent (e.g. a ModuleList)
        self.children = []
        self.depth = traceio.fqn_depth(fqn)


def _number(value):
    return value if traceio.is_number(value) else 0


def _phase_value(node, phase, field):
    """total_ms / ops of a node; a parent-only path sums its children."""
    if node.entry is not None:
        p = node.entry.get(phase)
        return _number(p.get(field)) if isinstance(p, dict) else 0
    return sum(_phase_value(c, phase, field) for c in node.children)


def _build_tree(modules):
    names = list(modules)
    if names == sorted(names):  # the exporter writes fqns sorted as strings: layers.10 < layers.2
        names.sort(key=lambda f: (f == "Global", _natural_key(f)))
    nodes = {}
    roots = []
    for fqn in names:
        parts = [fqn] if fqn == "Global" else fqn.split(".")
        for k in range(1, len(parts) + 1):
            path = ".".join(parts[:k])
            if path not in nodes:
                nodes[path] = _Node(path, None)
                if k == 1:
                    roots.append(nodes[path])
                else:
                    nodes[".".join(parts[:k - 1])].children.append(nodes[path])
        nodes[fqn].entry = modules[fqn]
    roots.sort(key=lambda n: n.fqn == "Global")  # Global last
    return roots


def _ellipsis():
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\u2026".encode(encoding)
        return "\u2026"
    except (UnicodeEncodeError, LookupError):
        return "..."


def _fit(text, width, ellipsis):
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return text[:width]
    return text[:width - len(ellipsis)] + ellipsis


def _format_ms(value, width):
    if not value:
        return "-"
    for decimals in (3, 2, 1, 0):
        text = f"{value:.{decimals}f}"
        if len(text) <= width:
            return text
    return text


def render_table(summary, depth=None, sort=None, phase=None, width=TABLE_WIDTH):
    """The summary as text lines: a title, the tree table and a legend, at most `width` wide."""
    modules = summary.get("modules", {})
    roots = _build_tree(modules)
    phases = [phase] if phase else list(PHASES)
    if sort is None:
        sort = phase if phase else "tree"
    sort_phase = {"fwd": ["forward"], "bwd": ["backward"], "total": list(PHASES)}.get(
        sort, [sort] if sort in PHASES else None)

    def key(node):
        return sum(_phase_value(node, p, "total_ms") for p in sort_phase)

    step_ms = _number(summary.get("step_ms"))
    if not step_ms:
        step_ms = sum(_number(m.get(p, {}).get("self_ms")) for m in modules.values()
                      for p in PHASES if isinstance(m.get(p), dict))

    ell = _ellipsis()
    rows = []

    def walk(nodes):
        if sort_phase is not None:
            nodes = sorted(nodes, key=key, reverse=True)  # stable: ties keep tree order
        for node in nodes:
            if depth is not None and node.depth > depth:
                continue
            rows.append(node)
            walk(node.children)

    walk(roots)

    num_w, pct_w, ops_w, calls_w, gf_w = 9, 6, 8, 6, 8
    type_w = min(16, max([4] + [len(str((n.entry or {}).get("module_type") or "")) for n in rows]))
    # GFLOPs only when the trace counted them (FQNTRACE_FLOPS=1).
    show_flops = any(_phase_value(r, p, "flops") for r in roots for p in phases)
    fixed = (type_w + num_w * len(phases) + pct_w + ops_w + calls_w + (len(phases) + 4)
             + ((gf_w + 1) if show_flops else 0))
    labels = []
    for node in rows:
        indent = "  " * min(node.depth, 12)
        label = node.fqn if node.depth == 0 else node.fqn.rsplit(".", 1)[-1]
        labels.append((indent, label))
    name_w = max([len("module")] + [len(i) + len(l) for i, l in labels])
    name_w = max(len("module"), min(name_w, width - fixed))

    header = ["module".ljust(name_w), "type".ljust(type_w)]
    header += [f"{PHASE_SHORT[p]} ms".rjust(num_w) for p in phases]
    header += ["%".rjust(pct_w), "ops".rjust(ops_w)]
    header += ["GFLOPs".rjust(gf_w)] if show_flops else []
    header += ["calls".rjust(calls_w)]
    lines = []
    rank = summary.get("rank")
    total_by_phase = {p: sum(_phase_value(r, p, "total_ms") for r in roots) for p in PHASES}
    title = os.path.basename(str(summary.get("trace") or "trace"))
    if isinstance(summary.get("ranks"), list):
        title = f"merged trace, {len(summary['ranks'])} ranks summed"
    elif rank is not None:
        title += f" (rank {rank})"
    title += f": {step_ms:.3f} ms op time"
    title += " (" + ", ".join(f"{PHASE_SHORT[p]} {total_by_phase[p]:.3f}" for p in PHASES) + ")"
    n_modules = sum(1 for n in _all_nodes(roots) if n.entry is not None and n.fqn != "Global")
    title += f", {n_modules} modules"
    lines.append(_fit(title, width, ell))
    if summary.get("complete") is False or _number(summary.get("dropped_events")):
        lines.append(_fit("note: incomplete trace (cut off, repaired or events dropped): the "
                          "numbers cover what was recorded", width, ell))
    lines.append("")
    lines.append(" ".join(header).rstrip())
    lines.append("-" * min(width, len(" ".join(header))))
    for node, (indent, label) in zip(rows, labels):
        entry = node.entry or {}
        values = [_phase_value(node, p, "total_ms") for p in phases]
        ops = sum(_phase_value(node, p, "ops") for p in phases)
        pct = 100.0 * sum(values) / step_ms if step_ms else 0.0
        name = indent + _fit(label, max(1, name_w - len(indent)), ell)
        module_type = _fit(str(entry.get("module_type") or ""), type_w, ell)
        cells = [name.ljust(name_w), module_type.ljust(type_w)]
        cells += [_format_ms(v, num_w).rjust(num_w) for v in values]
        cells += [(f"{pct:.1f}" if pct else "-").rjust(pct_w), str(int(ops)).rjust(ops_w)]
        if show_flops:
            gflops = sum(_phase_value(node, p, "flops") for p in phases) / 1e9
            cells.append((f"{gflops:.3f}" if gflops else "-").rjust(gf_w))
        cells.append(str(int(_number(entry.get("calls")))).rjust(calls_w))
        lines.append(" ".join(cells).rstrip())
    if not rows:
        lines.append("(no modules: the trace has no events with an fqn)")
    lines.append("")
    lines.append(_fit("ms: op time of the module and its submodules; %: share of all op time; "
                      "calls: forward calls", width, ell))
    if show_flops:
        lines.append(_fit("GFLOPs: FLOPs of the module and its submodules, all phases shown",
                          width, ell))
    return lines


def _all_nodes(roots):
    for node in roots:
        yield node
        yield from _all_nodes(node.children)
