"""`python -m fqntrace <verb>`: read fqntrace's trace files (no torch, standard library only).

    summary TRACE        per-module table (forward / backward / recompute time, %, ops, calls)
    validate TRACE       check the format; print the first problem
    repair TRACE         close a trace cut off by a crash
    merge TRACE... -o F  one trace from several ranks' traces

This module only parses arguments and dispatches. The work is in fqntrace.summarize and
fqntrace.table (summary), fqntrace.validate, fqntrace.repair and fqntrace.merge, which all read
traces through fqntrace.traceio.

Every failure is one line on stderr, `fqntrace: <what is wrong and what to do>`, and a non-zero
exit code (1: the file or the operation failed, 2: bad arguments).
"""
import argparse
import json
import os
import sys

from fqntrace import merge, repair, steps, summarize, table, validate
from fqntrace.traceio import PHASES, TraceError

PROG = "python -m fqntrace"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message}; see: {self.prog} --help")


def _err(message):
    sys.stderr.write("fqntrace: " + " ".join(str(message).split("\n")) + "\n")


def _note(message):
    _err("note: " + message)


def _depth(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


# ---------------------------------------------------------------------------------------------
# The verbs: each hands its arguments to its module and prints the result.


def _step_list(text):
    try:
        return steps.parse_step_list(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def cmd_summary(args):
    summary = summarize.load_for_summary(args.trace, note=_note, exclude_steps=args.exclude_steps)
    if args.json:
        sys.stdout.write(json.dumps(summarize.filter_depth(summary, args.depth), indent=2,
                                    ensure_ascii=False) + "\n")
        return 0
    lines = table.render_table(summary, depth=args.depth, sort=args.sort, phase=args.phase)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


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


# ---------------------------------------------------------------------------------------------


def build_parser():
    parser = _Parser(prog=PROG, description="Read fqntrace traces: per-module summary, format "
                     "check, repair of a cut-off trace, merge of per-rank traces. No torch needed.")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True,
                                  parser_class=_Parser)

    p = verbs.add_parser("summary", help="per-module table of forward / backward / recompute time",
                         description="Per-module table: op time of each module and its submodules "
                         "per phase, its share of all op time, op count and forward calls. With "
                         "training steps in the trace: the median per step, step 0 left out. Reads "
                         ".json and .jsonl traces, gzipped too (a cut-off one is repaired in "
                         "memory) and .summary.json files.")
    p.add_argument("trace", metavar="TRACE", help="a trace (.json, .jsonl) or a .summary.json")
    p.add_argument("--depth", type=_depth, metavar="N",
                   help="only modules at most N levels below the root (root = 0)")
    p.add_argument("--sort", choices=["tree", "fwd", "bwd", "total"], default=None,
                   help="order of sibling modules: tree (execution order, the default), or by "
                   "forward, backward or total time, largest first")
    p.add_argument("--phase", choices=list(PHASES),
                   help="show only this phase's time (and order siblings by it)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (the .summary.json shape) instead of a table")
    p.add_argument("--exclude-steps", type=_step_list, default=steps.DEFAULT_EXCLUDED,
                   metavar="LIST", help="steps left out of the per-step medians when the trace has "
                   "ProfilerStep ranges: e.g. 0,1 or 0-2, or none (default: 0, the warm-up step "
                   "with its one-time costs)")
    p.set_defaults(func=cmd_summary)

    p = verbs.add_parser("validate", help="check a trace and print its first problem",
                         description="Checks JSON, top-level fields, every event, nesting per "
                         "thread, flow pairs and that every op's fqn has a module span; prints "
                         "the first problem (exit 1) or 'ok: N events, M threads'.")
    p.add_argument("trace", metavar="TRACE")
    p.set_defaults(func=cmd_validate)

    p = verbs.add_parser("repair", help="close a trace cut off by a crash",
                         description="Keeps every complete event, drops a partial last line and "
                         "closes the file (tail marked complete: false, repaired: true). Writes "
                         "in place unless -o is given; a complete file is left untouched.")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", help="write the repaired trace here")
    p.set_defaults(func=cmd_repair)

    p = verbs.add_parser("merge", help="merge per-rank traces into one",
                         description="One Chrome trace from several ranks' traces: one process "
                         "row per rank (pid = rank), timestamps on the earliest clock base, flow "
                         "ids made unique. Cut-off inputs are repaired in memory.")
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="the merged trace (.json)")
    p.set_defaults(func=cmd_merge)
    return parser


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
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
        _err(f"internal error ({type(error).__name__}: {error}); please report it with the command "
             "and the trace file")
        return 1
