"""The per-module tree table `python -m fqntrace summary` prints, from a summary dict (the JSON
shape of <stem>.summary.json, see fqntrace.analysis.summarize).

One row per module, indented two spaces per fqn level; a path that only exists as a parent (a
ModuleList) sums its children. Columns: time per phase (subtree), the thread CPU time (all phases,
subtree) when the trace recorded it, share of all op time, op count, GFLOPs when the trace
counted them, forward calls. At most `width` columns: long names are cut
with an ellipsis. When the trace has training steps, the time columns are medians per step
(step_times.py; step 0 left out by default) and the title gives the step count and spread.
"""

import os
import re
import sys

from fqntrace.analysis import step_times, trace_events
from fqntrace.analysis.trace_events import PHASES, lineage, printable

PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "recomp"}
TABLE_WIDTH = 100


def _natural_key(fqn):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", fqn)]


class _Node:
    __slots__ = ("fqn", "entry", "children", "depth")

    def __init__(self, fqn, entry):
        self.fqn = fqn
        self.entry = entry  # None: a path that only exists as a parent (e.g. a ModuleList)
        self.children = []
        self.depth = trace_events.fqn_depth(fqn)


def _number(value):
    return value if trace_events.is_number(value) else 0


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
        above = None
        for path in lineage(fqn):
            if path not in nodes:
                nodes[path] = _Node(path, None)
                if above is None:
                    roots.append(nodes[path])
                else:
                    nodes[above].children.append(nodes[path])
            above = path
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
    return text[: width - len(ellipsis)] + ellipsis


def _format_ms(value, width):
    if not value:
        return "-"
    for decimals in (3, 2, 1, 0):
        text = f"{value:.{decimals}f}"
        if len(text) <= width:
            return text
    return text


def render_table(summary, depth=None, sort=None, phase=None, width=TABLE_WIDTH, cut_lines=True):
    """The summary as text lines: a title, the tree table and a legend, the table at most `width`
    wide. cut_lines=False: the title, notes and legend are whole (stdout is not a terminal)."""
    modules = summary.get("modules", {})
    roots = _build_tree(modules)
    phases = [phase] if phase else list(PHASES)
    if sort is None:
        sort = phase if phase else "tree"
    sort_phase = {"fwd": ["forward"], "bwd": ["backward"], "total": list(PHASES)}.get(
        sort, [sort] if sort in PHASES else None
    )

    per_step = step_times.has_steps(summary)
    time_field = "step_median_ms" if per_step else "total_ms"

    def key(node):
        return sum(_phase_value(node, p, time_field) for p in sort_phase)

    step_ms = _number(summary.get("step_ms"))
    if per_step:
        step_ms = _number(summary["steps"].get("median_op_ms"))
    elif not step_ms:
        step_ms = sum(
            _number(m.get(p, {}).get("self_ms"))
            for m in modules.values()
            for p in PHASES
            if isinstance(m.get(p), dict)
        )

    ell = _ellipsis()
    rows = _rows(roots, depth, key if sort_phase is not None else None)

    def line(text):
        return _fit(text, width, ell) if cut_lines else text

    num_w, pct_w, ops_w, calls_w, gf_w = 9, 6, 8, 6, 8
    type_w = min(
        16, max([4] + [len(printable((n.entry or {}).get("module_type") or "")) for n in rows])
    )
    # GFLOPs only when the trace counted them (FQNTRACE_FLOPS=1).
    show_flops = any(_phase_value(r, p, "flops") for r in roots for p in phases)
    spread_w = 6  # "±%" of a per-step table: the module's step-to-step spread, "!" when noisy
    # Device time only for an annotated torch.profiler trace with kernels (docs/trace-format.md).
    show_device = any(
        isinstance(m.get(p), dict) and "device_ms" in m[p] for m in modules.values() for p in phases
    )
    # The thread's CPU time (plugin/thread_cpu.h) when the trace recorded it: what diff tests.
    cpu_field = "step_cpu_median_ms" if per_step else "cpu_ms"
    show_cpu = any(
        isinstance(m.get(p), dict) and cpu_field in m[p] for m in modules.values() for p in phases
    )
    fixed = (
        type_w
        + num_w * len(phases) * (2 if show_device else 1)
        + pct_w
        + ops_w
        + calls_w
        + (len(phases) * (2 if show_device else 1) + 4)
        + ((gf_w + 1) if show_flops else 0)
        + ((spread_w + 1) if per_step else 0)
        + ((num_w + 1) if show_cpu else 0)
    )
    labels = []
    for node in rows:
        indent = "  " * min(node.depth, 12)
        label = node.fqn if node.depth == 0 else node.fqn.rsplit(".", 1)[-1]
        labels.append((indent, printable(label)))
    name_w = max([len("module")] + [len(indent) + len(label) for indent, label in labels])
    name_w = max(len("module"), min(name_w, width - fixed))

    header = ["module".ljust(name_w), "type".ljust(type_w)]
    unit = "ms/st" if per_step else "ms"
    header += [f"{PHASE_SHORT[p]} {unit}".rjust(num_w) for p in phases]
    header += [f"{PHASE_SHORT[p]} dev".rjust(num_w) for p in phases] if show_device else []
    header += [f"cpu {unit}".rjust(num_w)] if show_cpu else []
    header += ["%".rjust(pct_w)] + (["±%".rjust(spread_w)] if per_step else [])
    header += ["ops".rjust(ops_w)]
    header += ["GFLOPs".rjust(gf_w)] if show_flops else []
    header += ["calls".rjust(calls_w)]
    lines = []
    rank = summary.get("rank")
    total_by_phase = {p: sum(_phase_value(r, p, time_field) for r in roots) for p in PHASES}
    title = printable(os.path.basename(str(summary.get("trace") or "trace")))
    if isinstance(summary.get("ranks"), list):
        title = f"merged trace, {len(summary['ranks'])} ranks summed"
    elif rank is not None:
        title += f" (rank {rank})"
    title += f": {step_ms:.3f} ms op time" + (" per step (median)" if per_step else "")
    title += " (" + ", ".join(f"{PHASE_SHORT[p]} {total_by_phase[p]:.3f}" for p in PHASES) + ")"
    n_modules = sum(1 for n in _all_nodes(roots) if n.entry is not None and n.fqn != "Global")
    title += f", {n_modules} modules"
    lines.append(line(title))
    if per_step:
        st = summary["steps"]
        left_out = st.get("excluded") or []
        lines.append(
            line(
                f"{st['count']} steps, median {_number(st.get('median_ms')):.3f} ms (min "
                f"{_number(st.get('min_ms')):.3f}, max {_number(st.get('max_ms')):.3f}, MAD "
                f"{_number(st.get('mad_ms')):.3f}); "
                + (
                    f"left out: step {', '.join(str(s) for s in left_out)} (--exclude-steps)"
                    if left_out
                    else "no step left out"
                )
            )
        )
    if summary.get("complete") is False or _number(summary.get("dropped_events")):
        lines.append(
            line(
                "note: incomplete trace (cut off, repaired or events dropped): the "
                "numbers cover what was recorded"
            )
        )
    lines.append("")
    lines.append(" ".join(header).rstrip())
    lines.append("-" * min(width, len(" ".join(header))))
    for node, (indent, label) in zip(rows, labels):
        entry = node.entry or {}
        values = [_phase_value(node, p, time_field) for p in phases]
        ops = sum(_phase_value(node, p, "ops") for p in phases)
        pct = 100.0 * sum(values) / step_ms if step_ms else 0.0
        name = indent + _fit(label, max(1, name_w - len(indent)), ell)
        module_type = _fit(printable(entry.get("module_type") or ""), type_w, ell)
        cells = [name.ljust(name_w), module_type.ljust(type_w)]
        cells += [_format_ms(v, num_w).rjust(num_w) for v in values]
        if show_device:
            cells += [
                _format_ms(_phase_value(node, p, "device_ms"), num_w).rjust(num_w) for p in phases
            ]
        if show_cpu:
            cpu = sum(_phase_value(node, p, cpu_field) for p in phases)
            cells.append(_format_ms(cpu, num_w).rjust(num_w))
        cells.append((f"{pct:.1f}" if pct else "-").rjust(pct_w))
        if per_step:
            cells.append(_spread(entry).rjust(spread_w))
        cells.append(str(int(ops)).rjust(ops_w))
        if show_flops:
            gflops = sum(_phase_value(node, p, "flops") for p in phases) / 1e9
            cells.append((f"{gflops:.3f}" if gflops else "-").rjust(gf_w))
        cells.append(str(int(_number(entry.get("calls")))).rjust(calls_w))
        lines.append(" ".join(cells).rstrip())
    if not rows:
        lines.append("(no modules: the trace has no events with an fqn)")
    lines.append("")
    if per_step:
        lines.append(
            line(
                "ms/st: median op time per step, module and submodules; %: of a "
                "step's op time; ops, calls: all steps"
            )
        )
        lines.append(
            line(
                f"±%: spread from step to step (1.4826 MAD / median); ! over "
                f"{step_times.NOISY_PCT:g}%: noisy, a change smaller than the spread "
                "needs many steps to show (diff tests it)"
            )
        )
    else:
        lines.append(
            line(
                "ms: op time of the module and its submodules; %: share of all op "
                "time; calls: forward calls"
            )
        )
    if show_device:
        lines.append(
            line(
                "dev: device time (kernels, copies, fills of a torch.profiler trace) "
                "launched by the module's ops and its submodules', whole trace"
            )
        )
    if show_cpu:
        lines.append(
            line(
                f"cpu {unit}: the thread's CPU time in the module and its submodules, "
                "phases shown"
                + (" (median per step)" if per_step else "")
                + "; a wait for a core is not in it (Global's forward has none)"
            )
        )
    else:
        lines.append(line(CPU_OPT_IN_NOTE))
    if show_flops:
        lines.append(line("GFLOPs: FLOPs of the module and its submodules, all phases shown"))
    lines.extend(line(text) for text in sampled_notes(summary))
    lines.extend(line(text) for text in host_time_notes(summary))
    return lines


def host_time_notes(summary):
    """The lines that say a GPU job's times are the host's (the trace's process initialized a GPU
    and the trace holds no device events, or FQNTRACE_DEVICE collected none), else []."""
    device = summary.get("device")
    if not isinstance(device, dict) or device.get("device_events"):
        return []
    collected = device.get("collected") if isinstance(device.get("collected"), dict) else None
    off = printable(str(collected["off"])) if collected and "off" in collected else None
    if device.get("used") is not True:
        return (
            [f"host time only: FQNTRACE_DEVICE collected no device events ({off})"] if off else []
        )
    count = device.get("count")
    devices = f" ({count} device{'s' if count != 1 else ''})" if isinstance(count, int) else ""
    kind = printable(str(device.get("type") or "a GPU").upper())  # data from the trace
    lines = [
        f"host time only: the process used {kind}{devices} but the trace has no device events; "
        "times are op launches and sync waits, not GPU time"
    ]
    if off:
        lines.append(f"FQNTRACE_DEVICE collected no device events ({off})")
    elif collected is not None:
        lines.append("FQNTRACE_DEVICE collected no device events: no recorded op launched any")
    else:
        lines.append("device time per module: trace with FQNTRACE_DEVICE=1 (docs/trace-format.md)")
    return lines


# Thread CPU time is opt-in (plugin/thread_cpu.h): a table without it says how to get it.
CPU_OPT_IN_NOTE = (
    "cpu: not recorded; FQNTRACE_CPU=1 adds each module's thread CPU time (a system call per call)"
)


def sampled_notes(summary):
    """What a sampled trace's numbers are (docs/sampling.md); nothing for a full trace."""
    p = summary.get("sample")
    if not isinstance(p, (int, float)) or isinstance(p, bool):
        return []
    out = [
        f"sampled trace (FQNTRACE_SAMPLE={p:g}): a module's time is its scopes' own wall time "
        "(fwd) and its autograd nodes' time (bwd), both complete; ops and GFLOPs are the "
        f"sampled ops x {1 / p:g}"
    ]
    for fqn, entry in summary.get("modules", {}).items():
        for phase in PHASES:
            ci = (entry.get(phase) or {}).get("estimate_ci_ms")
            if isinstance(ci, (int, float)) and ci > 0:
                out.append(
                    f"{printable(fqn)} {phase}: includes ops outside any module or scope, estimated "
                    f"from the sampled ones: ±{ci:.3f} ms (95 %) over the whole run"
                )
    return out


def _spread(entry):
    spread = entry.get("step_spread_pct")
    if not trace_events.is_number(spread):
        return ""
    text = f"{spread:.0f}" if spread < 1000 else ">999"
    return text + ("!" if entry.get("noisy") is True else " ")


def _all_nodes(roots):
    for node in roots:
        yield node
        yield from _all_nodes(node.children)


# ---------------------------------------------------------------------------------------------
# Several ranks (crossrank.py): median / max per phase, the slowest rank, comm per rank

MAX_RANK_COLUMNS = 4  # comm per rank as columns up to this many ranks, else median / max


def render_cross_rank(result, depth=None, width=TABLE_WIDTH):
    """The cross-rank summary as text lines: a title, the straggler, the tree table, a legend."""
    modules = result.get("modules", {})
    roots = _build_tree(modules)
    ranks = result.get("ranks", [])
    ell = _ellipsis()
    phases = [
        p
        for p in PHASES
        if p != "recompute"
        or any(_number((m.get(p) or {}).get("max_ms")) for m in modules.values())
    ]
    rows = []

    def walk(nodes):
        for node in nodes:
            if depth is None or node.depth <= depth:
                rows.append(node)
                walk(node.children)

    walk(roots)
    per_rank_comm = len(ranks) <= MAX_RANK_COLUMNS
    num_w, slow_w = 8, 21
    comm_heads = [f"comm r{r}" for r in ranks] if per_rank_comm else ["comm med", "comm max"]
    heads = []
    for p in phases:
        heads += [f"{PHASE_SHORT[p]} med", f"{PHASE_SHORT[p]} max"]
    fixed = (num_w + 1) * (len(heads) + len(comm_heads)) + slow_w + 1
    labels = [
        ("  " * min(n.depth, 12), printable(n.fqn if n.depth == 0 else n.fqn.rsplit(".", 1)[-1]))
        for n in rows
    ]
    name_w = max([len("module")] + [len(indent) + len(label) for indent, label in labels])
    name_w = max(len("module"), min(name_w, width - fixed))

    step = result.get("step_ms", {})
    lines = [
        _fit(
            f"{len(ranks)} ranks ({', '.join(str(r) for r in ranks)}): op time per rank "
            f"median {_number(step.get('median_ms')):.3f} ms, max "
            f"{_number(step.get('max_ms')):.3f} ms (rank {step.get('slowest_rank')})",
            width,
            ell,
        )
    ]
    s = result.get("straggler")
    if s:
        lines.append(
            _fit(
                f"straggler: rank {s['rank']} in {printable(s['module'])} ({s['phase']}): "
                f"+{s['over_median_ms']:.3f} ms own op time over the ranks' median",
                width,
                ell,
            )
        )
    if result.get("complete") is False or any(
        _number(v) for v in result.get("dropped_events", {}).values()
    ):
        lines.append(
            _fit(
                "note: some traces are incomplete (cut off, repaired or events "
                "dropped): the numbers cover what was recorded",
                width,
                ell,
            )
        )
    # The first rank's notes that has them (every rank of a job runs alike).
    for device in (result.get("device") or {}).values():
        notes = host_time_notes({"device": device})
        if notes:
            lines.extend(_fit(text, width, ell) for text in notes)
            break
    lines.append("")
    header = ["module".ljust(name_w)] + [h.rjust(num_w) for h in heads]
    header += ["slowest".ljust(slow_w)] + [h.rjust(num_w) for h in comm_heads]
    lines.append(" ".join(header).rstrip())
    lines.append("-" * min(width, len(" ".join(header))))
    for node, (indent, label) in zip(rows, labels):
        entry = node.entry or {}
        cells = [(indent + _fit(label, max(1, name_w - len(indent)), ell)).ljust(name_w)]
        worst = None
        for p in phases:
            ph = entry.get(p) or {}
            cells += [
                _format_ms(_number(ph.get("median_ms")), num_w).rjust(num_w),
                _format_ms(_number(ph.get("max_ms")), num_w).rjust(num_w),
            ]
            gap = _number(ph.get("over_median_ms"))
            if gap > 0 and (worst is None or gap > worst[1]):
                worst = (p, gap, ph)
        if worst is None:
            cells.append("-".ljust(slow_w))
        else:
            p, gap, ph = worst
            median = _number(ph.get("median_ms"))
            pct = f" ({100.0 * gap / median:+.0f}%)" if median else ""
            cells.append(
                _fit(
                    f"r{ph.get('slowest_rank')} {PHASE_SHORT[p]} +{gap:.2f}{pct}", slow_w, ell
                ).ljust(slow_w)
            )
        comm = {}
        for p in PHASES:
            for r, v in ((entry.get(p) or {}).get("comm_ms") or {}).items():
                comm[r] = comm.get(r, 0) + _number(v)
        if per_rank_comm:
            cells += [_format_ms(comm.get(str(r), 0), num_w).rjust(num_w) for r in ranks]
        else:
            values = sorted(comm.values()) or [0]
            median = (
                values[len(values) // 2]
                if len(values) % 2
                else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
            )
            cells += [
                _format_ms(median, num_w).rjust(num_w),
                _format_ms(values[-1], num_w).rjust(num_w),
            ]
        lines.append(" ".join(cells).rstrip())
    if not rows:
        lines.append("(no modules: the traces have no events with an fqn)")
    lines.append("")
    lines.append(
        _fit(
            "med / max: op time of the module and its submodules, median and maximum "
            "over the ranks (ms)",
            width,
            ell,
        )
    )
    lines.append(
        _fit(
            "slowest: the rank furthest above the median and by how much (ms); comm: "
            "the module's collectives' backend time per rank (ms)",
            width,
            ell,
        )
    )
    return lines


# ---------------------------------------------------------------------------------------------
# `summary --memory`: per module, what it allocated and held (FQNTRACE_MEMORY; docs/memory.md).

MEMORY_COLUMNS = (
    ("forward", "alloc_bytes", "fwd alloc"),
    ("forward", "peak_bytes", "fwd peak"),
    ("forward", "activation_bytes", "activations"),
    ("backward", "alloc_bytes", "bwd alloc"),
    ("backward", "peak_bytes", "bwd peak"),
    ("backward", "grad_bytes", "grads"),
    ("recompute", "activation_bytes", "recomp act"),
)


def has_memory(summary):
    """Did the trace record memory (the phase objects carry alloc_bytes)?"""
    for m in summary.get("modules", {}).values():
        p = m.get("forward") if isinstance(m, dict) else None
        if isinstance(p, dict) and "alloc_bytes" in p:
            return True
    return False


def format_bytes(n):
    if not n:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _memory_value(node, phase, field):
    """A memory field of a node; a parent-only path sums its children (its peak: their max)."""
    if node.entry is not None:
        p = node.entry.get(phase)
        return _number(p.get(field)) if isinstance(p, dict) else 0
    values = [_memory_value(c, phase, field) for c in node.children]
    if field == "peak_bytes":
        return max(values, default=0)
    return sum(values)


def _rows(roots, depth, key=None):
    """The tree's nodes depth-first down to `depth`; siblings by `key`, largest first, when given
    (stable: ties keep tree order), else in tree order."""
    rows = []

    def walk(nodes):
        if key is not None:
            nodes = sorted(nodes, key=key, reverse=True)
        for node in nodes:
            if depth is not None and node.depth > depth:
                continue
            rows.append(node)
            walk(node.children)

    walk(roots)
    return rows


def render_memory_table(summary, depth=None, width=TABLE_WIDTH):
    """Text lines: one row per module (tree order) with the MEMORY_COLUMNS, at most `width` wide."""
    rows = _rows(_build_tree(summary.get("modules", {})), depth)
    cell = 12
    name_width = max(width - cell * len(MEMORY_COLUMNS), 16)
    ell = _ellipsis()
    lines = [
        f"Memory per module: {printable(summary.get('trace', ''))}",
        "module".ljust(name_width) + "".join(h.rjust(cell) for _, _, h in MEMORY_COLUMNS),
    ]
    for node in rows:
        label = "  " * node.depth + printable(
            node.fqn.rsplit(".", 1)[-1] if node.depth else node.fqn
        )
        cells = "".join(
            format_bytes(_memory_value(node, phase, field)).rjust(cell)
            for phase, field, _ in MEMORY_COLUMNS
        )
        lines.append(_fit(label, name_width - 1, ell).ljust(name_width) + cells)
    lines.append(
        "alloc: bytes allocated by the module and its submodules; peak: most live bytes "
        "allocated during one run; activations: forward bytes freed in backward; grads: "
        "backward bytes kept after it (.grad) (docs/memory.md)"
    )
    return lines
