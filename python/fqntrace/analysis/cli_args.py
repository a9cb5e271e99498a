"""The argument grammar of `python -m fqntrace <verb>`: the parser (build_parser) and the value
checkers of its options. cli.py runs the verb the parsed arguments name.
"""

import argparse

from fqntrace.analysis import diff, step_times
from fqntrace.analysis.errors import UsageError
from fqntrace.analysis.trace_events import PHASES

PROG = "python -m fqntrace"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message}; see: {self.prog} --help")


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return value


def _depth(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def _step_list(text):
    try:
        return step_times.parse_step_list(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _exclude_steps_option(parser):
    parser.add_argument(
        "--exclude-steps",
        type=_step_list,
        default=step_times.DEFAULT_EXCLUDED,
        metavar="LIST",
        help="steps left out of the per-step numbers when the "
        "trace has ProfilerStep ranges: e.g. 0,1 or 0-2, or none (default: 0, "
        "the warm-up step with its one-time costs)",
    )


def _percent(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a percentage (a number >= 0), got {text!r}"
        ) from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a percentage (a number >= 0), got {text}")
    return value


def _alpha(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a significance level between 0 and 1 (e.g. 0.05), got {text!r}"
        ) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a significance level between 0 and 1 (e.g. 0.05), got {text}"
        )
    return value


# ---------------------------------------------------------------------------------------------

_JOB = (
    "the job's trace pattern ('traces/run.*.json' or the FQNTRACE value with {rank}) or its "
    "trace folder"
)


def build_parser():
    parser = _Parser(
        prog=PROG,
        description="Read fqntrace traces: per-module summary, format "
        "check, repair of a cut-off trace, merge of per-rank traces, per-module "
        "diff of two runs, HTML report. No torch needed.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=_Parser)

    p = verbs.add_parser(
        "summary",
        help="per-module table of forward / backward / recompute time",
        description="Per-module table: op time of each module and its submodules "
        "per phase, its share of all op time, op count and forward calls. With "
        "training steps in the trace: the median per step, step 0 left out. Reads "
        ".json and .jsonl traces, gzipped too (a cut-off one is repaired in "
        "memory) and .summary.json files.",
    )
    p.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="a trace (.json, .jsonl, .gz) or a .summary.json; several traces (or a "
        "quoted pattern such as 'run.*.json') compare ranks: per module the median "
        "and max over the ranks, the slowest rank, comm time per rank",
    )
    p.add_argument(
        "--jobs",
        type=_positive,
        metavar="N",
        help="read at most N traces at once (default: one per CPU)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="summarize the traces on the Dask cluster at ADDRESS (tcp://host:8786), "
        "each file by a worker that sees it; patterns are expanded on the workers "
        "(needs the fqntrace[dask] extra)",
    )
    p.add_argument(
        "--depth",
        type=_depth,
        metavar="N",
        help="only modules at most N levels below the root (root = 0)",
    )
    p.add_argument(
        "--sort",
        choices=["tree", "fwd", "bwd", "total"],
        default=None,
        help="order of sibling modules: tree (execution order, the default), or by "
        "forward, backward or total time, largest first",
    )
    p.add_argument(
        "--phase",
        choices=list(PHASES),
        help="show only this phase's time (and order siblings by it)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (the .summary.json shape) instead of a table",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="per-module memory table (a trace recorded with FQNTRACE_MEMORY=1): "
        "bytes allocated, peak, activations kept for backward, gradients",
    )
    _exclude_steps_option(p)

    p = verbs.add_parser(
        "validate",
        help="check a trace and print its first problem",
        description="Checks JSON, top-level fields, every event, nesting per "
        "thread, flow pairs and that every op's fqn has a module span; prints "
        "the first problem (exit 1) or 'ok: N events, M threads'.",
    )
    p.add_argument("trace", metavar="TRACE")

    p = verbs.add_parser(
        "repair",
        help="close a trace cut off by a crash",
        description="Keeps every complete event, drops a partial last line and "
        "closes the file (tail marked complete: false, repaired: true). Writes "
        "in place unless -o is given; a complete file is left untouched.",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", help="write the repaired trace here")

    p = verbs.add_parser(
        "annotate",
        help="add fqn and phase to a torch.profiler trace",
        description="Gives each cpu_op of a torch.profiler (Kineto) trace the "
        "fqn and phase fqntrace recorded for the same RecordFunction (joined "
        "on \"Record function id\"), and each kernel, memcpy and memset the "
        "fqn and phase of the op that launched it (\"External id\" / "
        "correlation). Both traces must come from the same run, traced with "
        "FQNTRACE while torch.profiler recorded. A traced program's own "
        "exports are annotated as they are written; this is for traces "
        "exported otherwise.",
    )
    p.add_argument("kineto", metavar="KINETO", help="the torch.profiler trace (.json, .json.gz)")
    p.add_argument("fqntrace", metavar="FQNTRACE", help="fqntrace's trace of the same run")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        required=True,
        help="the annotated trace (.json; .json.gz writes gzip)",
    )

    p = verbs.add_parser(
        "merge",
        help="merge per-rank traces into one",
        description="One Chrome trace from several ranks' traces: one process "
        "row per rank (pid = rank), timestamps on the earliest clock base, flow "
        "ids made unique. Cut-off inputs are repaired in memory.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="the merged trace (.json)")

    p = verbs.add_parser(
        "diff",
        help="per-module change of time between two runs",
        description="One row per module (full fqn): time per phase in BASE and "
        "NEW and the change of its self time (its own ops). With training steps "
        "(at least %d kept on each side) the numbers are per step, the warm-up "
        "left out, and each module's self time per step is compared by a "
        "Mann-Whitney U test: the change (Hodges-Lehmann shift), its interval "
        "and p-value; significant changes first. Modules on one side only are "
        "listed. Reads traces and .summary.json files." % diff.MIN_STEPS,
    )
    p.add_argument("base", metavar="BASE", help="the reference run (trace or .summary.json)")
    p.add_argument("new", metavar="NEW", help="the run to check")
    p.add_argument(
        "--threshold",
        type=_percent,
        metavar="PCT",
        help=f"exit {diff.EXIT_REGRESSION} when a module's self time per step grew by "
        "more than PCT percent with significance: the whole 1 - --alpha interval of "
        "the change above PCT; only modules with at least --min-share of the op time "
        "count",
    )
    p.add_argument(
        "--alpha",
        type=_alpha,
        default=diff.DEFAULT_ALPHA,
        metavar="A",
        help="significance level of the test and 1 - the interval's confidence "
        f"(default {diff.DEFAULT_ALPHA:g})",
    )
    p.add_argument(
        "--min-share",
        type=_percent,
        default=diff.DEFAULT_MIN_SHARE_PCT,
        metavar="PCT",
        help="smallest module --threshold checks: its self time in "
        "percent of a step's op time, on the side where it is larger (default "
        f"{diff.DEFAULT_MIN_SHARE_PCT:g})",
    )
    _exclude_steps_option(p)
    p.add_argument(
        "--absolute",
        action="store_true",
        help="test each module's self time per step in ms (default: its time relative "
        "to the rest of its step, which a machine running slower or faster as a whole "
        "leaves unchanged)",
    )
    p.add_argument(
        "--totals",
        action="store_true",
        help="compare whole-run totals (every step, no test) instead of per-step numbers",
    )
    p.add_argument(
        "--measure",
        choices=diff.MEASURES,
        default="cpu",
        help="what the test compares per step: cpu (default) the thread CPU time in "
        "each module's own code, which time spent waiting for a core on a busy "
        "machine does not inflate (traces that recorded it; else wall), or wall: its "
        "ops' wall time",
    )
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.add_argument("--all", action="store_true", help="print every module (default: 40 rows)")

    p = verbs.add_parser(
        "report",
        help="self-contained HTML report (icicle, table, steps, ranks)",
        description="One HTML file that opens offline: the module tree as an "
        "icicle chart (width = time, colour = phase), a sortable module table, "
        "step times when the trace has ProfilerStep ranges, and with several "
        "ranks a rank selector and the spread across ranks. Two traces of the "
        "same rank (BASE NEW) colour the tree by change. Needs plotly: "
        "pip install 'fqntrace[report]'.",
    )
    p.add_argument(
        "traces", nargs="+", metavar="TRACE", help="traces (.json, .jsonl) or .summary.json files"
    )
    p.add_argument("-o", "--output", metavar="FILE.html", required=True)
    p.add_argument(
        "--mode",
        choices=["auto", "ranks", "diff"],
        default="auto",
        help="how to read several traces: ranks of one run, or BASE NEW to compare "
        "(auto: two traces of the same rank are compared, else ranks)",
    )
    _exclude_steps_option(p)
    p.add_argument(
        "--alpha",
        type=_alpha,
        default=diff.DEFAULT_ALPHA,
        metavar="A",
        help="BASE NEW: significance level of the per-module test that colours the "
        f"tree and table, as diff's (default {diff.DEFAULT_ALPHA:g})",
    )

    p = verbs.add_parser(
        "top",
        help="live per-module view of a running job",
        description="Follows the growing trace file(s) of a running job (.json, "
        ".jsonl, .gz; a file not created yet is waited for) and shows, refreshed "
        "about once a second, per module the forward / backward / recompute time "
        "over the last seconds and since the start, its share, steps/s and "
        "dropped events, per rank when several files are followed. Keys: s "
        "sort, Enter/+/- expand or collapse, up/down move, q quit. Needs the "
        "optional extra: pip install 'fqntrace[top]'.",
    )
    p.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="trace file(s); a pattern (quoted 'run.*.json' or with {rank}) follows "
        "every file that matches, also ones created later",
    )
    p.add_argument(
        "--window",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="the recent window in seconds (default 10)",
    )
    p.add_argument(
        "--interval",
        type=_seconds,
        default=1.0,
        metavar="S",
        help="seconds between refreshes (default 1)",
    )
    p.add_argument(
        "--depth",
        type=_depth,
        default=None,
        metavar="N",
        help="expand the tree N levels below the root at start (default: all)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="read what is there, print one screen and exit (no live view)",
    )
    _exclude_steps_option(p)

    p = verbs.add_parser(
        "ps",
        help="the armed processes of a job (FQNTRACE_STEPS=demand)",
        description="Lists the processes armed for on-demand captures "
        "(FQNTRACE_STEPS=demand, docs/on-demand.md) from their status records: "
        "rank, pid, host, step, steps/s, state (armed, capturing, or stale / "
        "dead when the record is no longer refreshed or its pid is gone), the "
        "last capture and the trace. Sorted by rank and pid.",
    )
    p.add_argument(
        "where",
        nargs="?",
        metavar="PATTERN|DIR|PID",
        help=f"{_JOB}, or a pid (default: every armed process of this user on this host)",
    )

    p = verbs.add_parser(
        "capture",
        help="ask armed processes to record the same next steps",
        description="Asks the live armed processes a pattern (or a pid) names "
        "to record the same steps, each into a capture file beside its trace "
        "(run.0.json -> run.0.capture-1.json), waits for them, and prints the "
        "captured files' summary as `summary FILE...` does (several files: the "
        "cross-rank summary). The first step is the next one every process "
        "can still reach. Progress lines go to stderr; exit 1 naming every "
        "process that refused, failed, died or did not answer in time.",
    )
    p.add_argument("target", metavar="PATTERN|PID", help=f"{_JOB}, or one process's pid")
    p.add_argument("--steps", type=_positive, metavar="N", help="record N steps")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--roundup",
        type=_positive,
        metavar="K",
        help="start at a step that is a multiple of K (default 1)",
    )
    where.add_argument(
        "--at",
        type=_depth,
        metavar="STEP",
        help="start at this step (it must not be past on any process)",
    )
    p.add_argument(
        "--seconds",
        type=_seconds,
        metavar="S",
        help="record for S seconds; without --steps from now (a loop without optimizer steps)",
    )
    p.add_argument(
        "--memory", action="store_true", help="record memory numbers too (as FQNTRACE_MEMORY=1)"
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        metavar="S",
        help="stop waiting after S seconds; the request expires then (default: 30 s "
        "more than the steps should take at the processes' rates, 60 s at least)",
    )
    p.add_argument(
        "--no-summary",
        action="store_true",
        help="print the captured files' paths instead of their summary",
    )
    return parser
