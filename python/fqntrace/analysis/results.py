"""`fqntrace.load(path)`: a trace's results as Python objects, for notebooks and scripts.

A `Trace` holds what `python -m fqntrace summary --json` prints for the same files (the same
engine: summarize.py, and crossrank.py for several ranks) and hands it out as tables:
`.summary()` one row per module and phase, `.steps()` one row per training step, `.diff(other)`
diff's rows with their verdicts, `.ranks()` the spread across ranks. The column names are the
JSON keys of docs/trace-format.md, so a number in a table is the number the CLI prints.

Tables are pandas DataFrames when pandas is installed (the `fqntrace[notebook]` extra);
`frame=False` gives the same rows as a list of dicts, which is all this module needs itself.
No torch here: results load where only the analysis half is installed.
"""

import os
import sys

from fqntrace.analysis import crossrank, diff, report, step_times, table, trace_events
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import PHASES

PANDAS_HINT = (
    "needs pandas, which is not installed here: pip install 'fqntrace[notebook]' (or "
    "pip install pandas); frame=False gives the same rows as a list of dicts"
)

# Column order of the tables; keys a trace has beyond these (memory, device time) follow them.
_MODULE_KEYS = ("fqn", "module_type", "depth", "phase", "calls")
_PHASE_KEYS = (
    "total_ms",
    "self_ms",
    "step_median_ms",
    "step_self_median_ms",
    "step_mad_ms",
    "ops",
    "self_ops",
    "flops",
    "self_flops",
    "comm_ms",
    "comm_bytes",
    "collectives",
)
_PER_MODULE_KEYS = ("step_spread_pct", "noisy")
_CROSS_KEYS = (
    "median_ms",
    "max_ms",
    "min_ms",
    "slowest_rank",
    "over_median_ms",
    "self_median_ms",
    "self_max_ms",
    "self_slowest_rank",
)


def _frame(rows, what, columns=None):
    try:
        import pandas
    except ImportError:
        raise ImportError(f"fqntrace: {what} as a DataFrame {PANDAS_HINT}") from None
    return pandas.DataFrame(rows, columns=columns)


def _columns(rows, first):
    """`first`, then every other key in the order the rows first show it."""
    order = list(first)
    seen = set(order)
    for row in rows:
        for key in row:
            if key not in seen:
                seen.add(key)
                order.append(key)
    return order


def _is_scalar(value):
    return value is None or isinstance(value, (bool, int, float, str))


def _phase_is_empty(p):
    return not any(v for k, v in p.items() if k != "top_ops" and trace_events.is_number(v))


def module_rows(summary, rank=None, depth=None):
    """One dict per module and phase of a summary (the `summary --json` shape of one trace).
    The forward row of every module is there (a module that never ran has zeros); a backward
    or recompute row only where that phase has something."""
    rows = []
    for fqn, m in summary.get("modules", {}).items():
        if not isinstance(m, dict):
            continue
        level = trace_events.fqn_depth(fqn)
        if depth is not None and level > depth:
            continue
        for phase in PHASES:
            p = m.get(phase)
            if not isinstance(p, dict) or (phase != "forward" and _phase_is_empty(p)):
                continue
            row = {} if rank is None else {"rank": rank}
            row.update(
                fqn=fqn,
                module_type=m.get("module_type") or "",
                depth=level,
                phase=phase,
                calls=m.get("calls", 0),
            )
            row.update((k, v) for k, v in p.items() if _is_scalar(v))
            row.update((k, m[k]) for k in _PER_MODULE_KEYS if k in m)
            rows.append(row)
    return rows


def step_rows(summary, rank=None):
    """One dict per recorded training step: step, wall ms, op ms, whether it was left out."""
    per_step = (summary.get("steps") or {}).get("per_step") or []
    rows = []
    for s in per_step:
        row = {} if rank is None else {"rank": rank}
        row.update((k, v) for k, v in s.items() if _is_scalar(v))
        rows.append(row)
    return rows


def cross_rank_rows(result, depth=None):
    """One dict per module and phase of a cross-rank summary: spread over the ranks."""
    rows = []
    for fqn, m in result.get("modules", {}).items():
        level = trace_events.fqn_depth(fqn)
        if depth is not None and level > depth:
            continue
        for phase in PHASES:
            p = m.get(phase)
            if not isinstance(p, dict):
                continue
            if phase != "forward" and not any(p.get(k) for k in ("max_ms", "self_max_ms")):
                continue
            row = {
                "fqn": fqn,
                "module_type": m.get("module_type") or "",
                "depth": level,
                "phase": phase,
            }
            row.update((k, p[k]) for k in _CROSS_KEYS if k in p)
            for r, values in (p.get("ranks") or {}).items():
                row[f"total_ms_rank{r}"] = values.get("total_ms")
            rows.append(row)
    return rows


def diff_rows(result):
    """One dict per row of a diff (diff.compare), intervals and per-phase times flat."""
    rows = []
    for r in result["rows"]:
        row = {
            "fqn": r["fqn"],
            "module_type": r.get("module_type") or "",
            "status": r.get("status"),
            "verdict": r.get("verdict"),
        }
        for key in ("change_ms", "change_pct"):
            row[key] = r.get(key)
        for key, low_high in (
            ("interval_ms", r.get("interval_ms")),
            ("interval_pct", r.get("interval_pct")),
        ):
            low, high = low_high if isinstance(low_high, (list, tuple)) else (None, None)
            row[key + "_low"], row[key + "_high"] = low, high
        for key in ("p_value", "significant", "gated", "regressed", "measure"):
            row[key] = r.get(key)
        for key in ("self_ms", "total_ms", "cpu_ms"):  # cpu_ms: rows tested on CPU time
            pair = r.get(key)
            base, new = pair if isinstance(pair, (list, tuple)) else (None, None)
            row[key + "_base"], row[key + "_new"] = base, new
        for side in ("base", "new"):
            for phase, p in (r.get(side) or {}).items():
                if isinstance(p, dict):
                    row[f"{phase}_ms_{side}"] = p.get("total_ms")
        rows.append(row)
    return rows


def _as_paths(paths):
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise TraceError(
            "load() needs a trace: a path, a pattern such as 'run.*.json', or a list of them"
        )
    return crossrank.expand_paths(paths)


def _step_set(steps):
    """exclude_steps as a set of step numbers: "0-2", "none", a number or numbers."""
    try:
        if isinstance(steps, str):
            return step_times.parse_step_list(steps)
        if isinstance(steps, int):
            steps = [steps]
        numbers = frozenset(steps)
        if not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise ValueError("step numbers are whole numbers >= 0")
        return numbers
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"fqntrace: exclude_steps={steps!r}: {error}; e.g. \"0\", \"0-2\", \"none\" or {{0, 1}}"
        ) from None


def _say(message):
    sys.stderr.write(f"fqntrace: note: {message}\n")


class Trace:
    """The results of one trace (one rank) or of several (ranks of one run). `json` is what
    `summary --json` prints for the same files."""

    def __init__(self, paths, exclude_steps=step_times.DEFAULT_EXCLUDED, note=_say):
        self.exclude_steps = _step_set(exclude_steps)
        self.paths = _as_paths(paths)
        self.notes = []
        # How the object shows itself in a notebook (_repr_html_): the chart, the table's depth.
        self.display_chart = True
        self.display_depth = None

        def hear(message):
            if message not in self.notes:
                self.notes.append(message)
                note(message)

        # report.load_run with use_sibling=False: the numbers `summary --json` prints (not a
        # <stem>.summary.json beside the trace), and the per-step op times the report draws.
        self._loaded = [
            (p,) + report.load_run(p, hear, self.exclude_steps, use_sibling=False)
            for p in self.paths
        ]
        self._per_file = [summary for _, summary, _ in self._loaded]
        if len(self.paths) == 1:
            self.json = self._per_file[0]
        else:
            self.json = crossrank.cross_rank(self.paths, self._per_file, note=hear)

    @property
    def several(self):
        return len(self.paths) > 1

    def _by_rank(self):
        """(rank, summary) of each file in rank order: the ranks cross_rank gave the files."""
        summary_of = dict(zip(self.paths, self._per_file))
        return [(int(r), summary_of[path]) for r, path in self.json["traces"].items()]

    def summary(self, frame=True, depth=None):
        """One row per module and phase: fqn, module_type, depth, phase, calls, the phase's
        numbers (total_ms / self_ms over the whole trace; step_median_ms / step_self_median_ms
        per step when the trace has steps; ops, FLOPs, comm; memory and device time when
        recorded). Several ranks: each rank's rows, with a `rank` column."""
        if self.several:
            rows = [row for r, s in self._by_rank() for row in module_rows(s, r, depth)]
            first = ("rank",) + _MODULE_KEYS + _PHASE_KEYS
        else:
            rows, first = module_rows(self.json, depth=depth), _MODULE_KEYS + _PHASE_KEYS
        if not frame:
            return rows
        # The phase keys a trace lacks (per-step ones without steps) are no columns.
        columns = [
            c
            for c in _columns(rows, first)
            if c not in _PHASE_KEYS or any(c in row for row in rows)
        ]
        return _frame(rows, ".summary()", columns)

    def steps(self, frame=True):
        """One row per recorded training step (`ProfilerStep#N`): step, ms (the step's wall
        time), op_ms, excluded (left out of the per-step medians). Empty without steps."""
        if self.several:
            rows = [row for r, s in self._by_rank() for row in step_rows(s, r)]
            first = ("rank", "step", "ms", "op_ms", "excluded")
        else:
            rows, first = step_rows(self.json), ("step", "ms", "op_ms", "excluded")
        return _frame(rows, ".steps()", _columns(rows, first)) if frame else rows

    def ranks(self, frame=True, depth=None):
        """Several ranks: per module and phase the median, max and min over the ranks, the
        slowest rank, and each rank's total (`summary --json` over the same files)."""
        if not self.several:
            raise ValueError(
                "fqntrace: ranks() compares several traces; load them together: "
                "fqntrace.load(['run.0.json', 'run.1.json']) or 'run.*.json'"
            )
        rows = cross_rank_rows(self.json, depth)
        return (
            _frame(
                rows,
                ".ranks()",
                _columns(rows, ("fqn", "module_type", "depth", "phase") + _CROSS_KEYS),
            )
            if frame
            else rows
        )

    def compare(
        self,
        other,
        threshold=None,
        alpha=diff.DEFAULT_ALPHA,
        min_share=diff.DEFAULT_MIN_SHARE_PCT,
        absolute=False,
        totals=False,
        measure="cpu",
    ):
        """`diff` of this trace (BASE) and `other` (NEW: a Trace or a path): its JSON dict."""
        if not isinstance(other, Trace):
            other = Trace(other, exclude_steps=self.exclude_steps)
        if self.several or other.several:
            raise ValueError(
                "fqntrace: diff compares one trace with one trace (a rank with the "
                "same rank of another run)"
            )
        return diff.compare(
            self.json,
            other.json,
            threshold=threshold,
            min_share=min_share,
            base_name=self.paths[0],
            new_name=other.paths[0],
            alpha=alpha,
            totals=totals,
            absolute=absolute,
            measure=measure,
        )

    def diff(self, other, threshold=None, frame=True, **options):
        """diff's table, this trace as BASE and `other` as NEW: one row per module with its
        verdict (slower / faster / same ...), change, interval and p-value. With `threshold`
        (percent) the rows over it have regressed=True; a DataFrame also carries the gate in
        `.attrs` (regressions, passed, threshold_pct, mode, measure, note). options: alpha,
        min_share, absolute, totals, measure ("cpu" or "wall"), as `python -m fqntrace diff`."""
        result = self.compare(other, threshold=threshold, **options)
        rows = diff_rows(result)
        if not frame:
            return rows
        out = _frame(rows, ".diff()", _columns(rows, ()))
        out.attrs.update(
            regressions=list(result["regressions"]),
            passed=not result["regressions"],
            threshold_pct=result["threshold_pct"],
            mode=result["mode"],
            measure=result.get("measure"),
            note=result["note"],
            alpha=result["alpha"],
        )
        return out

    def report_data(self):
        """The HTML report's data (fqntrace.analysis.report.data_of): one run, or the ranks."""
        return report.data_of(self._loaded, mode="ranks" if self.several else "single")

    def report(self, path=None):
        """Writes the HTML report (`python -m fqntrace report` of the same files); returns its
        path. Default: the first trace's name with .html."""
        if path is None:
            path = (report.trace_stem(self.paths[0]) or self.paths[0]) + ".html"
        written, _ = report.write_report(self.paths, os.fspath(path), data=self.report_data())
        return written

    def table(self, depth=None):
        """The text table `python -m fqntrace summary` prints."""
        if self.several:
            return "\n".join(table.render_cross_rank(self.json, depth=depth))
        return "\n".join(table.render_table(self.json, depth=depth, cut_lines=False))

    def __repr__(self):
        names = ", ".join(os.path.basename(p) for p in self.paths)
        return f"<fqntrace.Trace {names}: {len(self.json.get('modules', {}))} modules>"

    def _repr_pretty_(self, printer, cycle):  # IPython's text view: the CLI's table
        printer.text(repr(self) if cycle else self.table(depth=self.display_depth))

    def _repr_html_(self):
        from fqntrace.analysis import inline_view

        try:
            return inline_view.render(self, chart=self.display_chart, depth=self.display_depth)
        except Exception as error:  # a notebook shows the text view instead of our traceback
            sys.stderr.write(
                f"fqntrace: no HTML view ({type(error).__name__}: {error}); please report it\n"
            )
            return None


def load(paths, exclude_steps=step_times.DEFAULT_EXCLUDED):
    """The results of a trace: `fqntrace.load("run.json").summary()`. `paths`: a trace (.json,
    .jsonl, .gz; a cut-off one is read as far as it goes), a .summary.json, a pattern
    ('run.*.json') or a list: several ranks of one run. `exclude_steps`: the steps left out of
    the per-step numbers ("0", "0-2", "none", or a set of numbers; default: step 0, as the CLI).
    Raises fqntrace.TraceError with a one-line message for a file it cannot read."""
    return Trace(paths, exclude_steps=exclude_steps)
