"""`python -m fqntrace <verb>`: read fqntrace's trace files (no torch, standard library only).

    summary TRACE...     per-module table (forward / backward / recompute time, %, ops, calls);
                         several traces (ranks): median / max per module, the slowest rank
    validate TRACE       check the format; print the first problem
    repair TRACE         close a trace cut off by a crash
    merge TRACE... -o F  one trace from several ranks' traces
    diff BASE NEW        per-module change of time between two runs (--threshold for CI)
    report TRACE... -o F self-contained HTML report (needs the `fqntrace[report]` extra)
    top TRACE...         live per-module view of a running job's trace(s)
    annotate KINETO FQNTRACE -o OUT
                         a torch.profiler trace gets fqntrace's fqn and phase (same run)
    ps [PATTERN|DIR|PID] the armed processes (FQNTRACE_STEPS=demand): step, rate, state
    capture PATTERN|PID --steps N
                         ask armed processes to record the same next steps, then summarize

This module only dispatches: cli_args parses the arguments. The work is in the modules of
fqntrace.analysis: verbs (summary and diff, each read -> compute -> render: summarize, crossrank
over several ranks, table, diff), top (the live view; needs the optional `rich`), validate,
repair, merge, report (which alone imports plotly, when it writes), and ondemand_status (ps) and
ondemand (capture), which read and write the files of docs/on-demand.md. Every verb reads traces
through one reader, tracestream.

Every failure is one line on stderr, `fqntrace: <what is wrong and what to do>`, and a non-zero
exit code (1: the file or the operation failed, 2: bad arguments; 3: `diff --threshold` found a
module slower by more than the threshold).
"""

import gc
import os
import sys

from fqntrace.analysis import (
    diff,
    kineto_annotate,
    merge,
    ondemand,
    ondemand_status,
    repair,
    report,
    validate,
    verbs,
)
from fqntrace.analysis.cli_args import build_parser
from fqntrace.analysis.errors import TraceError, UsageError


def _err(message):
    sys.stderr.write("fqntrace: " + " ".join(str(message).split("\n")) + "\n")


def _note(message):
    _err("note: " + message)


# ---------------------------------------------------------------------------------------------
# The verbs: each hands its arguments to its module and prints the result.


def cmd_summary(args):
    sys.stdout.write(
        verbs.summary_output(
            args.traces,
            scheduler=args.scheduler,
            jobs=args.jobs,
            depth=args.depth,
            sort=args.sort,
            phase=args.phase,
            as_json=args.json,
            memory=args.memory,
            exclude_steps=args.exclude_steps,
            cut_lines=sys.stdout.isatty(),
            note=_note,
        )
    )
    return 0


def cmd_top(args):
    from fqntrace.analysis import top  # the live view; needs the optional `rich`

    return top.main(args)


def cmd_validate(args):
    print(validate.validate_file(args.trace))
    return 0


def cmd_repair(args):
    print(repair.repair_file(args.trace, args.output))
    return 0


def cmd_merge(args):
    ranks, n_events = merge.merge_traces(args.traces, args.output, note=_note)
    print(f"merged: {ranks} ranks, {n_events} events -> {args.output}")
    return 0


def cmd_diff(args):
    text, failure = verbs.diff_output(
        args.base,
        args.new,
        threshold=args.threshold,
        min_share=args.min_share,
        alpha=args.alpha,
        totals=args.totals,
        absolute=args.absolute,
        measure=args.measure,
        exclude_steps=args.exclude_steps,
        as_json=args.json,
        show_all=args.all,
        note=_note,
    )
    sys.stdout.write(text)
    if failure:
        _err(failure)
        return diff.EXIT_REGRESSION
    return 0


def cmd_annotate(args):
    counts, ids = kineto_annotate.annotate_files(args.kineto, args.fqntrace, args.output)
    print(f"annotated: {counts.line()} -> {args.output}")
    if counts.cpu_ops and not counts.cpu_ops_annotated:
        _err(
            f"no cpu_op of {args.kineto} matched the {ids} ids of {args.fqntrace}; are they "
            "from the same run?"
        )
        return 1
    return 0


def cmd_report(args):
    path, info = report.write_report(
        args.traces,
        args.output,
        mode=args.mode,
        note=_note,
        exclude_steps=args.exclude_steps,
        alpha=args.alpha,
    )
    print(f"report: {path}  ({info})")
    return 0


def cmd_ps(args):
    sys.stdout.write("\n".join(ondemand_status.ps_lines(args.where, note=_note)) + "\n")
    return 0


def _progress(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def cmd_capture(args):
    if args.steps is None and args.seconds is None:
        raise UsageError("say what to record: --steps N (the next N steps) or --seconds S")
    if args.steps is None and (args.at is not None or args.roundup is not None):
        raise UsageError("--at and --roundup place --steps: give --steps N")
    result = ondemand.capture(
        args.target,
        steps=args.steps,
        roundup=args.roundup,
        at=args.at,
        seconds=args.seconds,
        memory=args.memory,
        timeout=args.timeout,
        note=_note,
        progress=_progress,
    )
    code = 0
    if args.no_summary:
        sys.stdout.write("".join(path + "\n" for path in result.files))
    elif result.files:
        sys.stdout.flush()
        try:  # the captured files as `summary FILE...` shows them
            code = cmd_summary(build_parser().parse_args(["summary", "--", *result.files]))
        except TraceError as error:
            _err(error)
            code = 1
    if result.problems:
        _err(
            f"capture {result.request_id} did not finish on every process: "
            + "; ".join(result.problems)
        )
        return 1
    return code


# ---------------------------------------------------------------------------------------------

# The verb -> its function (build_parser names the verb in args.verb).
_COMMANDS = {
    "summary": cmd_summary,
    "validate": cmd_validate,
    "repair": cmd_repair,
    "annotate": cmd_annotate,
    "merge": cmd_merge,
    "diff": cmd_diff,
    "report": cmd_report,
    "top": cmd_top,
    "ps": cmd_ps,
    "capture": cmd_capture,
}


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameters


def _keep_freed_chunks():
    """The batch verbs read a trace in 4 MiB chunks. glibc hands each new chunk fresh pages (it
    maps large blocks on their own and gives the heap's free top back), so the kernel faulted in
    and zeroed every chunk's pages: 27 K faults, 8 % of summary's CPU time on 300 MiB. Freed
    chunks kept in the heap are reused instead. The peak resident size does not change (the
    pages were resident at the peak anyway). glibc only; elsewhere nothing is done."""
    import ctypes  # here, not at the top: ~7 ms that `top` and every other verb would pay

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # above any chunk: chunks come from the heap
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.verb != "top" or args.once:
            # The batch verbs (and `top --once`, one pass over the file) make millions of
            # short-lived dicts and no reference cycles: the cyclic collector would only rescan
            # them (~15 % of the CPU time of a summary).
            gc.disable()
            _keep_freed_chunks()
        return _COMMANDS[args.verb](args)
    except UsageError as error:
        _err(error)
        return 2
    except TraceError as error:
        _err(error)
        return 1
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BrokenPipeError:
        # The reader went away (`... | head`): stay quiet, also when Python flushes at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except MemoryError:
        _err("out of memory while reading the trace; use a machine with more memory")
        return 1
    except Exception as error:  # never a traceback for the user
        _err(
            f"internal error ({type(error).__name__}: {error}); please report it with the command "
            "and the trace file"
        )
        return 1
