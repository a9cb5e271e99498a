"""A trace's results as one block of HTML for a notebook cell: the report's own page (icicle,
sortable table, steps) in an iframe, and below it the table `python -m fqntrace summary` prints.

The iframe holds the whole page in `srcdoc`, plotly.js inlined as in the report file, so the
output works offline and its styles and scripts cannot touch the notebook's (JupyterLab, classic
Notebook and VS Code all render an iframe in a trusted output). That costs plotly.js's ~4.7 MB per
displayed chart; `chart=False` shows the table alone. Without plotly the table is shown with one
line saying how to get the chart. Every name from the trace is escaped: it is data, not markup.
"""

import html

from fqntrace.analysis import report
from fqntrace.analysis.errors import TraceError

FRAME_HEIGHT_PX = 760
_STYLE = (
    "font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; "
    "white-space: pre; overflow-x: auto; margin: 6px 0"
)


def _escape(text):
    return html.escape(str(text), quote=True)


def chart_frame(trace):
    """The report page of `trace` in an iframe, or a line saying why there is none."""
    try:
        page = report.render_html(trace.report_data(), report.page_title(trace.paths))
    except TraceError as error:  # no plotly, or nothing to draw (no modules)
        return f'<div style="color:#a33">fqntrace: no chart: {_escape(error)}</div>'
    return (
        f'<iframe class="fqntrace-report" srcdoc="{_escape(page)}" '
        f'style="width:100%; height:{FRAME_HEIGHT_PX}px; border:1px solid #ddd; '
        'resize:vertical"></iframe>'
    )


def render(trace, chart=True, depth=None):
    """The HTML of `trace` (a fqntrace.analysis.results.Trace) for a notebook."""
    parts = ['<div class="fqntrace-view">']
    for note in trace.notes:
        parts.append(f'<div style="color:#a33">fqntrace: note: {_escape(note)}</div>')
    if chart:
        parts.append(chart_frame(trace))
    parts.append(
        f'<pre class="fqntrace-table" style="{_STYLE}">{_escape(trace.table(depth=depth))}</pre>'
    )
    parts.append("</div>")
    return "\n".join(parts)
