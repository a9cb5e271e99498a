"""FQNTRACE_FORMATS=summary: `<stem>.summary.json`, written once a session has finished, from its
finished trace, by the function `python -m fqntrace summary --json TRACE` calls, so the file is
exactly what that command prints. The library asks the package for it (it registers when the
binding is imported) and, in a program without Python, says in one line how to get it."""

import sys


def write_finished(binding):
    """Writes the summary of every trace the stopped session finished (its trace, and its
    captures'). Never raises: a summary that cannot be made costs one line on stderr."""
    try:
        finished = binding.take_summaries()
    except Exception as error:
        sys.stderr.write(
            f"fqntrace: FQNTRACE_FORMATS=summary: no summary written "
            f"({type(error).__name__}: {error})\n"
        )
        return
    for trace, summary_path in finished:
        try:
            _write(trace, summary_path)
        except Exception as error:
            sys.stderr.write(
                f"fqntrace: {summary_path} not written ({type(error).__name__}: "
                f"{error}); `python -m fqntrace summary --json {trace} > "
                f"{summary_path}` writes it from the trace\n"
            )


def _write(trace, summary_path):
    # Imported here: the analysis half is needed only when a session that asked for it ends.
    from fqntrace.analysis import step_times, trace_write, verbs

    # What `summary --json TRACE` prints, by the same call (tests/python/test_summary.py holds
    # the two equal).
    text = verbs.summary_output(
        [trace],
        as_json=True,
        exclude_steps=step_times.DEFAULT_EXCLUDED,
        cut_lines=False,
        note=lambda message: None,
    )
    trace_write.write_atomic(summary_path, text)
