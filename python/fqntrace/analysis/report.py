"""`python -m fqntrace report TRACE... -o FILE.html`: one self-contained HTML file of the module
tree (icicle chart), a sortable module table, step times and, for several ranks, the spread
across ranks; for BASE NEW, the tree coloured by change.

The page (report_page.html beside this file) draws with plotly.js, which the `plotly` Python
package ships; it is inlined, so the file opens offline from disk. plotly is an optional extra
(`pip install 'fqntrace[report]'`), imported only here.

What goes into the page is the summary (summarize.py, per module and phase), never the
events: a trace with a `<stem>.summary.json` beside it and no step ranges is not even parsed.
Steps (steps.py) come from the same streamed pass as the summary, in memory bounded by the
modules and steps; then every number of the page is per step as `summary` gives it (the median
over the steps kept, the warm-up left out by `exclude_steps`), the steps left out are marked in
the steps chart, and BASE NEW is coloured by `diff`'s verdict (fqntrace.analysis.diff). A
`<stem>.summary.json` beside a trace with steps is used when it has the per-step samples
(`kept` in `steps`) and the default steps are left out.
"""

import html
import json
import os
import time

from fqntrace.analysis import (
    diff,
    step_times,
    steps,
    summarize,
    table,
    trace_events,
    trace_format,
    trace_write,
    whole_file,
)
from fqntrace.analysis.errors import TraceError

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_page.html")
INSTALL_HINT = (
    "the report needs plotly: pip install 'fqntrace[report]' (or: pip install plotly "
    "into this environment)"
)


def _plotly_js():
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise TraceError(INSTALL_HINT) from None
    return get_plotlyjs()


def trace_stem(path):
    """The path without its trace extension (.json, .jsonl, either with .gz), or None when it
    has none of them."""
    for ext in (".json.gz", ".jsonl.gz", ".jsonl", ".json"):
        if path.lower().endswith(ext):
            return path[: -len(ext)]
    return None


def _sibling_summary(path):
    """<stem>.summary.json written by the same session (FQNTRACE_FORMATS=summary), or None."""
    stem = trace_stem(path)
    if stem is None:
        return None
    candidate = stem + ".summary.json"
    if not os.path.isfile(candidate):
        return None
    try:
        summary = summarize.load_summary(candidate)
    except TraceError:
        return None
    named = os.path.basename(str(summary.get("trace") or ""))
    return summary if named in ("", os.path.basename(path)) else None


def load_run(
    path, note=lambda message: None, exclude_steps=step_times.DEFAULT_EXCLUDED, use_sibling=True
):
    """(summary, steps) of one input: a .summary.json (no steps) or a trace. A trace's module
    numbers come from its <stem>.summary.json when the session wrote one (use_sibling); its
    events are read (as a stream, tracestream.py) only when there is no such summary or the
    trace has step ranges. use_sibling=False: always the numbers `summary --json` prints."""
    if summarize.is_summary_path(path):
        return summarize.load_summary(path), []
    sibling = _sibling_summary(path) if use_sibling else None
    if sibling is not None and not whole_file.lines_with(path, step_times.STEP_MARK):
        return sibling, []
    try:
        summary, times = summarize.summarize_with_steps(
            path, note=note, exclude_steps=exclude_steps
        )
    except TraceError:
        try:  # a summary under another name (`summary --json > out.json`)
            if os.path.getsize(path) < summarize.SUMMARY_FILE_LIMIT and not trace_format.is_gzip(
                path
            ):
                return summarize.load_summary(path), []
        except (OSError, TraceError):
            pass
        raise
    # With steps, the sibling serves when it has the per-step samples (the core writes them,
    # step 0 left out); other steps left out need the events.
    if sibling is not None and not (
        exclude_steps == step_times.DEFAULT_EXCLUDED
        and isinstance(sibling.get("steps"), dict)
        and "kept" in sibling["steps"]
    ):
        sibling = None
    step_list = steps.per_step_from(times)
    for s in step_list:
        s["excluded"] = s["step"] in exclude_steps
    return (sibling if sibling is not None else summary), step_list


def _label(path, summary):
    rank = summary.get("rank")
    name = os.path.basename(path)
    return f"rank {rank}: {name}" if rank is not None else name


def build_data(
    paths,
    mode="auto",
    note=lambda message: None,
    exclude_steps=step_times.DEFAULT_EXCLUDED,
    alpha=diff.DEFAULT_ALPHA,
):
    """The page's data: {"mode", "runs": [...], "diff": ...}."""
    loaded = [(p,) + load_run(p, note, exclude_steps) for p in paths]
    return data_of(loaded, mode=mode, note=note, alpha=alpha)


def data_of(loaded, mode="auto", note=lambda message: None, alpha=diff.DEFAULT_ALPHA):
    """The page's data from [(path, summary, steps)] as load_run gives them."""
    paths = [p for p, _, _ in loaded]
    if mode == "auto":
        ranks = [s.get("rank") for _, s, _ in loaded]
        mode = (
            "diff"
            if len(loaded) == 2 and ranks[0] == ranks[1]
            else ("ranks" if len(loaded) > 1 else "single")
        )
    if mode == "diff" and len(loaded) != 2:
        raise TraceError(f"report --mode diff compares two traces (BASE NEW), got {len(loaded)}")
    if mode == "ranks" and len(loaded) == 1:
        mode = "single"
    runs = []
    for path, summary, step_list in loaded:
        modules = diff.module_times(summary)
        if not modules:
            raise TraceError(
                f"{path}: no modules in this trace (no events with an fqn); nothing to report"
            )
        per_step = step_times.has_steps(summary)
        op_ms = summary["steps"].get("median_op_ms") if per_step else None
        runs.append(
            {
                "label": _label(path, summary),
                "path": path,
                "rank": summary.get("rank"),
                "op_ms": round(
                    op_ms if trace_events.is_number(op_ms) else diff.total_op_ms(modules), 6
                ),
                "per_step": per_step,
                "step_stats": {k: v for k, v in summary["steps"].items() if k != "per_step"}
                if per_step
                else None,
                "time_definition": summary.get("time_definition"),
                "host_time_note": "; ".join(table.host_time_notes(summary)),
                "complete": summary.get("complete", True) is not False
                and not summary.get("dropped_events"),
                "modules": modules,
                "steps": step_list,
            }
        )
    data = {"mode": mode, "runs": runs, "diff": None}
    if mode == "diff":
        data["diff"] = diff.compare(
            loaded[0][1], loaded[1][1], base_name=paths[0], new_name=paths[1], alpha=alpha
        )
        if data["diff"]["note"]:
            note(data["diff"]["note"])
        runs[0]["label"] = "BASE " + os.path.basename(paths[0])
        runs[1]["label"] = "NEW " + os.path.basename(paths[1])
    return data


def render_html(data, title):
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    # "</script" or "<!--" inside a <script> changes how the page parses; JSON spells "<" as
    # \u003c just as well, so no "<" is left in the data.
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    js = _plotly_js().replace("</script", "<\\/script")
    return (
        page.replace("{{TITLE}}", html.escape(title))
        .replace("/*{{PLOTLY_JS}}*/", js)
        .replace("/*{{REPORT_DATA}}*/null", blob)
    )


def page_title(paths):
    return "fqntrace report: " + ", ".join(os.path.basename(p) for p in paths)


def write_report(
    paths,
    output,
    mode="auto",
    note=lambda message: None,
    exclude_steps=step_times.DEFAULT_EXCLUDED,
    alpha=diff.DEFAULT_ALPHA,
    data=None,
):
    """Writes the report; returns (output path, a short line of what was written). `data`:
    the page's data when the caller has it already (build_data / data_of)."""
    _plotly_js()  # fail with the install hint before reading any trace
    if not output.lower().endswith((".html", ".htm")):
        raise TraceError(f"{output}: the report is an HTML file; give -o a name ending in .html")
    started = time.perf_counter()
    if data is None:
        data = build_data(paths, mode=mode, note=note, exclude_steps=exclude_steps, alpha=alpha)
    text = render_html(data, page_title(paths))
    trace_write.write_atomic(output, text)
    seconds = time.perf_counter() - started
    n_modules = max(len(r["modules"]) for r in data["runs"])
    n_steps = max(len(r["steps"]) for r in data["runs"])
    return output, (
        f"{data['mode']}, {len(data['runs'])} run(s), {n_modules} modules, "
        f"{n_steps} steps, {len(text.encode('utf-8')) / 1e6:.1f} MB, "
        f"{seconds:.2f} s"
    )
