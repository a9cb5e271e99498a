"""Jupyter: `%load_ext fqntrace` registers the `%%fqntrace` cell magic, which traces the cell
(fqntrace.profile) and shows its results under it: the report's icicle and the summary table
(fqntrace.analysis.inline_view). The cell's value is the fqntrace.Trace of its run, so
`_.summary()` (or `Out[n].summary()`) gives the DataFrame.

The cell always runs, exactly once: when tracing cannot start here (a session is already
running, e.g. FQNTRACE is set for the kernel; a bad option), it runs untraced after one line
saying why. Each run writes its own trace (a new file under the temporary directory unless -o).
"""

import shlex
import sys

from fqntrace import _profile

USAGE = (
    "%%fqntrace [-o PATH] [--steps A:B] [--memory] [--exclude-steps LIST] [--depth N] "
    "[--no-chart] [--quiet]"
)


def _say(message):
    sys.stderr.write(f"fqntrace: {message}\n")


def _options(line):
    """The magic's options (an argparse Namespace; exclude_steps already a set of steps), or
    raises ValueError with the one line to show."""
    import argparse

    from fqntrace.analysis import step_times

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(f"{message}; usage: {USAGE}")

    parser = Parser(prog="%%fqntrace", add_help=False)
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--steps", default=None)
    parser.add_argument("--memory", action="store_true")

    def step_list(text):
        try:
            return step_times.parse_step_list(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument("--exclude-steps", type=step_list, default=step_times.DEFAULT_EXCLUDED)
    parser.add_argument("--depth", type=int, default=None)
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise ValueError(f"{error}; usage: {USAGE}") from None
    return parser.parse_args(words)


def run_cell_traced(shell, line, cell):
    """The body of %%fqntrace: runs `cell` in `shell` traced; returns what to display."""
    try:
        options = _options(line)
    except ValueError as error:
        _say(f"%%fqntrace: {error}; the cell runs untraced")
        shell.run_cell(cell)
        return None
    path = options.output or _profile.temporary_path("cell")
    session = _profile.profile(path, steps=options.steps, memory=options.memory or None)
    try:
        written = session.__enter__()
    except Exception as error:  # a bad path or steps, a session already running: not the cell's
        _say(f"{str(error).removeprefix('fqntrace: ').rstrip('.')}; the cell runs untraced")
        shell.run_cell(cell)
        return None
    try:
        shell.run_cell(cell)
    finally:
        try:
            session.__exit__(None, None, None)
        except Exception as error:  # the trace could not be finished: said, the cell is done
            _say(str(error).removeprefix("fqntrace: "))
            written = None
    if written is None or options.quiet:
        return None
    from fqntrace.analysis import results
    from fqntrace.analysis.errors import TraceError

    try:
        trace = results.load(str(written), exclude_steps=options.exclude_steps)
    except TraceError as error:
        _say(f"the cell ran traced, but its trace {written} cannot be read: {error}")
        return None
    except Exception as error:  # ours, never the cell's: one line, the cell's outcome stands
        _say(
            f"could not read the cell's trace {written} ({type(error).__name__}: {error}); "
            "please report it"
        )
        return None
    trace.display_chart, trace.display_depth = not options.no_chart, options.depth
    return trace


def load_ipython_extension(ipython):
    """`%load_ext fqntrace`: registers the %%fqntrace cell magic (loading it twice is harmless)."""

    def fqntrace(line, cell):
        return run_cell_traced(ipython, line, cell)

    fqntrace.__doc__ = (
        f"{USAGE}\n\nTraces the cell with fqntrace and shows the module tree "
        "(icicle) and the per-module table under it. The cell's value is the "
        "run's fqntrace.Trace: _.summary() is a DataFrame."
    )
    ipython.register_magic_function(fqntrace, magic_kind="cell", magic_name="fqntrace")
