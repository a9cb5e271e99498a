"""What the reading verbs print, each one way through: read the traces, compute, render.

summary: read by summarize (one trace) or crossrank (several ranks, also on a
Dask cluster), computed across ranks by crossrank.cross_rank, rendered as JSON or by
table. diff: two summaries read by summarize, compared and rendered by
diff. cli.py parses the arguments and writes what these return.
"""

import json

from fqntrace.analysis import crossrank, diff, diff_table, summarize, table
from fqntrace.analysis.errors import UsageError


def summary_output(
    traces,
    *,
    scheduler=None,
    jobs=None,
    depth=None,
    sort=None,
    phase=None,
    as_json=False,
    memory=False,
    exclude_steps,
    cut_lines,
    note,
):
    """What `summary TRACE...` prints, as one text. cut_lines: cut the title to the table's
    width (on a terminal; a file or pipe gets it whole)."""
    if scheduler and memory:
        raise UsageError("--memory applies to one trace; --scheduler reads several")
    paths = None if scheduler else crossrank.expand_paths(traces)  # a cluster expands its own
    if paths is not None and len(paths) == 1:
        return _one_trace_output(
            paths[0], depth, sort, phase, as_json, memory, exclude_steps, cut_lines, note
        )
    if sort or phase:
        raise UsageError(
            "--sort and --phase apply to one trace; over several traces the table "
            "shows every phase in tree order"
        )
    if scheduler:
        result = crossrank.across_ranks_on_cluster(traces, scheduler, note=note)
    else:
        result = crossrank.across_ranks(paths, jobs=jobs, note=note)
    if as_json:
        return _json_text(summarize.filter_depth(result, depth))
    return _lines_text(table.render_cross_rank(result, depth=depth))


def _one_trace_output(path, depth, sort, phase, as_json, memory, exclude_steps, cut_lines, note):
    summary = summarize.load_for_summary(path, note=note, exclude_steps=exclude_steps)
    if as_json:
        return _json_text(summarize.filter_depth(summary, depth))
    if memory:
        if not table.has_memory(summary):
            raise UsageError(
                f"{path} has no memory numbers; record it with FQNTRACE_MEMORY=1 "
                "(or fqntrace.profile(..., memory=True))"
            )
        return _lines_text(table.render_memory_table(summary, depth=depth))
    return _lines_text(
        table.render_table(summary, depth=depth, sort=sort, phase=phase, cut_lines=cut_lines)
    )


def _json_text(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _lines_text(lines):
    return "\n".join(lines) + "\n"


def diff_output(
    base,
    new,
    *,
    threshold=None,
    min_share,
    alpha,
    totals=False,
    absolute=False,
    measure,
    exclude_steps,
    as_json=False,
    show_all=False,
    note,
):
    """(what `diff BASE NEW` prints, the one-line failure when modules are slower by more than
    the threshold, else None)."""
    base_summary = summarize.load_for_summary(base, note=note, exclude_steps=exclude_steps)
    new_summary = summarize.load_for_summary(new, note=note, exclude_steps=exclude_steps)
    result = diff.compare(
        base_summary,
        new_summary,
        threshold=threshold,
        min_share=min_share,
        base_name=base,
        new_name=new,
        alpha=alpha,
        totals=totals,
        absolute=absolute,
        measure=measure,
    )
    if result["note"]:
        note(result["note"])
    if as_json:
        text = _json_text(result)
    else:
        text = _lines_text(diff_table.render(result, limit=None if show_all else 40))
    failure = None
    if result["regressions"]:
        surely = (
            f" (the whole {diff.confidence(alpha)} interval above it)"
            if result["mode"] == "test"
            else ""
        )
        failure = (
            f"{len(result['regressions'])} module(s) slower by more than {threshold:g}%"
            f"{surely}: " + ", ".join(result["regressions"][:5])
        )
    return text, failure
