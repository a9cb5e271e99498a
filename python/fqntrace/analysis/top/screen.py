"""Drawing top's screen with rich: the title line, the notes, the module table and its legend."""

from fqntrace.analysis import sampled as sampled_trace
from fqntrace.analysis import trace_events
from fqntrace.analysis.top.live import CPU
from fqntrace.analysis.top.tree import build_rows
from fqntrace.analysis.trace_events import PHASES

PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "rcmp"}


def _ms(ns):
    if not ns:
        return "-"
    ms = ns / 1e6
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.1f}" if ms >= 100 else f"{ms:.2f}"


def render(sources, view, window_s, rate):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    ordered = sources.ordered()
    roots = build_rows(ordered)
    rows = view.visible(roots)
    if rows:
        view.selected = min(view.selected, len(rows) - 1)
    labels = []
    for index, s in enumerate(ordered):
        labels.append(f"r{s.rank}" if s.rank is not None else f"f{index}")
    ranked = [(lab, s) for lab, s in zip(labels, ordered) if s.follower.header is not None]
    per_rank = 1 < len(ranked) <= 8
    events = sum(s.live.events for s in ordered)
    trace_s = (
        max(((s.live.latest_ns or 0) - (s.live.first_ns or 0)) / 1e9 for s in ordered)
        if ordered
        else 0
    )
    steps = [s.live.steps_per_s() for s in ordered]
    steps_text = "-"
    if any(v is not None for v in steps):
        steps_text = " ".join(
            f"{lab} {v:.2f}" if len(ordered) > 1 else f"{v:.2f}"
            for lab, v in zip(labels, steps)
            if v is not None
        )
    behind = sum(s.behind() for s in ordered)
    dropped = [s.dropped() for s in ordered]
    dropped_text = (
        "?"
        if not dropped or any(d is None for d in dropped)
        else str(sum(d for d in dropped if isinstance(d, int)))
    )
    title = Text()
    title.append("fqntrace top", style="bold")
    files = f"  {len(ordered)} files" if len(ordered) != 1 else ""
    title.append(
        f"{files}  trace {trace_s:.1f} s  last {window_s:g} s  steps/s {steps_text}  "
        f"{events:,} events ({rate:,.0f}/s)  "
        + (f"dropped {dropped_text}  " if dropped_text != "?" else "")
        + f"sort {view.sort}"
    )
    notes = [Text(s.message, style="yellow") for s in ordered if s.message]
    notes += [
        Text(f"waiting for files matching {p} (retrying every refresh)", style="yellow")
        for p in sources.unmatched
    ]
    if behind > 1 << 20:
        notes.append(
            Text(
                f"reading {behind / (1 << 20):.0f} MiB behind the writer (the job "
                "writes events faster than this view reads them)",
                style="yellow",
            )
        )
    sampled = [s for s in ordered if sampled_trace.sample_of(s.follower.header) is not None]
    if sampled:
        notes.append(
            Text(
                f"{len(sampled)} of the traces are sampled (FQNTRACE_SAMPLE): top counts "
                "the ops they hold, a fraction of the job's; `python -m fqntrace summary` "
                "gives their module times",
                style="yellow",
            )
        )
    bad = sum(s.follower.bad_lines for s in ordered)
    if bad:
        notes.append(Text(f"{bad} lines were not valid JSON and were skipped", style="yellow"))

    # recompute only when there is any (activation checkpointing)
    phases = [p for p in PHASES if p != "recompute" or any(r.total[p] for r in roots)]
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False, header_style="bold")
    table.add_column("module", no_wrap=True, overflow="ellipsis", max_width=40)
    for p in phases:
        table.add_column(PHASE_SHORT[p], justify="right", no_wrap=True)
    table.add_column("%", justify="right", no_wrap=True)
    for p in phases:
        table.add_column("\u03a3" + PHASE_SHORT[p], justify="right", no_wrap=True)
    with_device = any(r.device for r in roots)
    if with_device:
        table.add_column("\u03a3dev", justify="right", no_wrap=True)
    with_steps = any(r.steps for r in roots)
    with_cpu = any(r.steps.get(CPU) for r in roots)
    if with_steps:
        for p in phases:
            table.add_column(PHASE_SHORT[p] + "/st", justify="right", no_wrap=True)
    if with_cpu:
        table.add_column("cpu/st", justify="right", no_wrap=True)
    if per_rank:
        for lab, _ in ranked:
            table.add_column(lab, justify="right", no_wrap=True)
    recent_all = sum(sum(r.recent.values()) for r in roots)
    for i, r in enumerate(rows):
        mark = ("- " if r.fqn not in view.collapsed else "+ ") if r.children else "  "
        name = (
            "  " * min(r.depth, 12)
            + mark
            + (r.fqn if r.depth == 0 or r.fqn == "Global" else r.fqn.rsplit(".", 1)[-1])
        )
        share = sum(r.recent.values()) / recent_all * 100 if recent_all else 0
        # A Text, not a str: rich would read a name's "[...]" as markup.
        cells = [Text(trace_events.printable(name))] + [_ms(r.recent[p]) for p in phases]
        cells.append(f"{share:.1f}" if share else "-")
        cells += [_ms(r.total[p]) for p in phases]
        if with_device:
            cells.append(_ms(r.device))
        if with_steps:
            cells += [_ms(r.step_median(p)) for p in phases]
        if with_cpu:
            cells.append(_ms(r.step_median(CPU)))
        if per_rank:
            cells += [_ms(r.per_rank.get(lab, 0)) for lab, _ in ranked]
        table.add_row(*cells, style="reverse" if i == view.selected else None)
    legend = Text(
        f"ms of op time of the module and its submodules over the last {window_s:g} s "
        "of trace time (%: share"
        + (", rN: per rank" if per_rank else "")
        + "); \u03a3: since the start"
        + (
            "; \u03a3dev: device time of the kernels, copies and fills it launched, all phases "
            "(written at each recording's end)"
            if with_device
            else ""
        )
        + (
            "; /st: median per step over the last steps, " + _left_out(ordered[0].exclude_steps)
            if with_steps
            else ""
        )
        + ("; cpu/st: the thread's CPU time, all phases" if with_cpu else "")
        + ".  keys: q quit, s sort, \u2191/\u2193 move, "
        "Enter expand/collapse, +/- all",
        style="dim",
    )
    parts = [title] + notes + [table if rows else Text("(no module time yet)"), legend]
    return Group(*parts), rows


def _left_out(exclude):
    return (
        ("step " + ", ".join(str(s) for s in sorted(exclude)[:5]) + " left out")
        if exclude
        else "no step left out"
    )
