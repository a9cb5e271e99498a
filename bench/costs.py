"""The table docs/benchmarks.md opens with: what fqntrace costs, each row against its target, from
bench/measured.json's parts and bench/measured_by_hand.toml's rows, with the date that measured
it and the command that measures it again. A row measured before the code it describes last
changed (CODE, by `git log`) goes to the table below it instead (costs-stale), dated. Also the
number and table formatting bench/doc_tables.py's tables share.

The rows are ROWS, in the table's order: each is a function of the results that measures it
(what, measured, met), or None, or a KeyError, when the results lack its numbers; the rows
measured by hand and P9's rows per verb come in as lists.
"""

import datetime
import functools
import os
import subprocess
from typing import NamedTuple

import tomllib
from modes import CLI_DOC_SIZES, CLI_RSS_LIMIT_MIB

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def f(value, digits=0, sign=False):
    if value is None:
        return "n/a"
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def pct(value, digits=1):
    """A signed percentage: +1.2 %."""
    return f"{f(value, digits, sign=True)} %"


def table(head, rows, align="l"):
    """A Markdown table of `head` (column names) and `rows` (lists of cells); `align` a letter per
    column, l(eft) or r(ight), its last letter repeated for the columns after it. `head` may
    also be one string, the names joined by "|"."""
    if isinstance(head, str):
        head = head.split("|")
    align = align.ljust(len(head), align[-1])
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return "\n".join([table_line(head), rule, *map(table_line, rows)])


def table_line(cells):
    return "| " + " | ".join(map(str, cells)) + " |"


def day(date):
    return (date or "?")[:10]


def cli_runs(results):
    """{MiB: numbers} of `scripts/bench.sh --cli MiB`'s last runs (the parts cli-MiB)."""
    return {mb: results[f"cli-{mb}"] for mb in CLI_DOC_SIZES if f"cli-{mb}" in results}


def cli_size(mb):
    return f"{mb // 1024} GiB" if mb % 1024 == 0 else f"{mb} MiB"


def kilo(events_per_s):
    return f"{events_per_s / 1e3:,.0f} k"


# bench/measured_by_hand.toml: "reasons" {row id: why it misses}, "newer" {row id: {date, text}},
# "row" [rows measured by hand].
with open(os.path.join(HERE, "measured_by_hand.toml"), "rb") as fh:
    BY_HAND = {"reasons": {}, "newer": {}, "row": [], **tomllib.load(fh)}
REASONS = BY_HAND["reasons"]

# run_mode.mlp_step: nn.Sequential of 4 Linear and 3 ReLU, 8 module calls a step.
MLP_MODULE_CALLS = 8


# The code each measurement describes (paths for `git log`): a row measured before that code
# last changed is not shown in the opening table but below it, dated, until a run measures it
# again (parts: PART_CODE, "tracer" unless named there; rows measured by hand: their `code`).
CODE = {
    "tracer": "plugin record_function buffer drain exporters binding include common "
    "python/fqntrace/_hooks.py".split(),
    "exporters": "buffer drain exporters tests/support bench/exporter_bench".split(),
    "trackers": "plugin record_function buffer binding common python/fqntrace/_hooks.py "
    "python/fqntrace/_mod_tracker.py".split(),
    "cli": "python/fqntrace/analysis analysis common".split(),
}
PART_CODE = {"p3": "trackers", "p4": "exporters", "cli-300": "cli", "cli-1024": "cli"}


@functools.cache
def code_changed(code):
    """The time of the last commit that touched CODE[code], leaving out the commits named in
    .git-blame-ignore-revs (layout and comment-only changes, which change no measured code)."""
    log = ["git", "-C", ROOT, "log", "--no-merges", "--format=%H %cI", "--", *CODE[code]]
    out = subprocess.run(log, capture_output=True, text=True, check=True).stdout
    ignored = ignored_revisions()
    for rev, when in (line.split(" ", 1) for line in out.splitlines()):
        if rev not in ignored:
            return datetime.datetime.fromisoformat(when)
    raise RuntimeError(f"no commit touched {CODE[code]}")


def ignored_revisions():
    """The full hashes listed in .git-blame-ignore-revs (git blame's own list: # comments)."""
    try:
        with open(os.path.join(ROOT, ".git-blame-ignore-revs")) as f:
            return {line.split("#")[0].strip() for line in f} - {""}
    except FileNotFoundError:
        return set()


def measured_at(date):
    """A run's ISO time, or a day measured by hand, read as that day's start (a row measured by
    hand on the day its code changed counts as before the change)."""
    when = datetime.datetime.fromisoformat(date)
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def costs_table(results):
    """The document's first table: what fqntrace costs, each against its target and reference,
    with the date of the run that measured it and the command that measures it again. Only rows
    measured since the code they describe last changed (the others: stale_costs_table)."""
    head = ["what", "measured", "target", "met", "date", "command"]
    return "\n".join([table(head, []), *cost_rows(results)[0]])


def stale_costs_table(results):
    """The rows of the opening table measured before the code they describe last changed."""
    stale = cost_rows(results)[1]
    if not stale:
        return "No row of the opening table was measured before its code last changed."
    head = ["what", "measured", "target", "met", "date", "code last changed", "command"]
    return "\n".join([table(head, []), *stale])


class Row(NamedTuple):
    id: str  # names its reason to miss and a newer number by hand (measured_by_hand.toml)
    part: str | None  # bench/measured.json's part that measured it; None: measured by hand
    what: str
    measured: str
    target: str
    met: bool | None  # None: no target
    command: str | None = None  # None: `bench/driver.py --only PART`
    date: str | None = None  # None: the date of the part's run
    code: str | None = None  # None: the part's (PART_CODE)


def cost_rows(results):
    """(fresh rows, stale rows) of the opening table, as Markdown lines."""
    results = results or {}
    fresh, stale = [], []
    for r in (r for rows in ROWS for r in rows(results)):
        date, measured = r.date or results[r.part]["run"]["date"], r.measured
        newer = BY_HAND["newer"].get(r.id)
        if newer and newer["date"] > day(date):
            measured += f"; by hand on {newer['date']}: {newer['text']}"
        reason = REASONS.get(r.id, "see Notes")
        met = "—" if r.met is None else "yes" if r.met else f"**no** — {reason}"
        command = r.command or f"`bench/driver.py --only {r.part}`"
        changed = code_changed(r.code or PART_CODE.get(r.part, "tracer"))
        if measured_at(date) >= changed:
            fresh.append(table_line([r.what, measured, r.target, met, day(date), command]))
        else:
            cells = [r.what, measured, r.target, met, day(date), str(changed.date()), command]
            stale.append(table_line(cells))
    return fresh, stale


ROWS = []  # functions of the results, each giving its rows, in the table's order


def row(rid, part, target):
    """Adds the row that the decorated function measures: (what, measured, met) from the results,
    or None (or a KeyError) when they lack its numbers."""

    def add(measure):
        def rows(results):
            try:
                got = measure(results)
            except KeyError:
                return []
            return [] if got is None else [Row(rid, part, got[0], got[1], target, got[2])]

        ROWS.append(rows)
        return measure

    return add


def versus(ours, theirs, ratio, plus="+", unit="", digits=0):
    """'+ours vs +theirs: **ratio×**'."""
    ours, theirs = f(ours, digits) + unit, f(theirs, digits) + unit
    return f"{plus}{ours} vs {plus}{theirs}: **{f(ratio, 2)}×**"


def bold(target, digits=0, unit=""):
    """(its value in bold, met) of a part's target."""
    return f"**{f(target['value'], digits)}{unit}**", target["met"]


def before_after(before, after, change_pct, digits):
    return f"{f(before, digits)} → {f(after, digits)} ms: **{pct(change_pct)}**"


OP, STEP = "main_thread_ir_per_op", "main_thread_ir_per_step"  # callgrind: the loop thread's
MINE_THEIRS = ("fqntrace", "profiler")
EMPTY_SAMPLED = ("empty_sampled", "empty_sampled_ops")
MODTRACKERS = ("fqntrace_modtracker", "torch_modtracker")  # P3's variants, ours and torch's


def added(by_mode, mode, key):
    """A callgrind count of `mode` above the baseline's."""
    return by_mode[mode][key] - by_mode["baseline"][key]


def vs_empty(by_mode, key, limit):
    """(measured, met) of the instructions fqntrace adds against the empty observer's."""
    ours, floor = added(by_mode, "fqntrace", key), added(by_mode, "empty", key)
    return versus(ours, floor, ours / floor), ours / floor <= limit


def p1_versus(results, theirs, target):
    """(P1's ns added per op, fqntrace's against the mode `theirs`'s, met) and P1's summary."""
    s = results["p1"]["summary"]
    ops, target = s["ops"], s["targets"][target]
    added = (ops[m]["added_ns"] for m in ("fqntrace", theirs))
    return versus(*added, target["value"], unit=" ns"), target["met"], s


@row("op-empty", "p1", "≤ 1.5×")
def op_empty(results):
    ours, met, s = p1_versus(results, "empty", "ops_vs_empty")
    best = f(s["ratios"].get("best_fqntrace_over_empty_added_ns"), 2)
    what = "Per tiny op (`torch.add`, 4 elements): wall time added, vs the empty observer's"
    return what, f"{ours} (best samples {best}×)", met


@row("op-profiler", "p1", "≤ 0.5×")
def op_profiler(results):
    ours, met, s = p1_versus(results, "profiler", "ops_vs_profiler")
    stack = f"(with_stack: +{f(s['ops']['profiler_stack']['added_ns'])} ns)"
    return "… vs torch.profiler's (CPU)", f"{ours} {stack}", met


@row("op-ir", "callgrind", "≤ 1.25×")
def op_ir(results):
    what = "Per tiny op: loop-thread instructions added, vs the empty observer's (callgrind)"
    return what, *vs_empty(results["callgrind"]["modes"], OP, 1.25)


@row("op-all", "callgrind", "≤ 0.6×")
def op_all(results):
    modes = results["callgrind"]["modes"]
    ours, theirs = (added(modes, m, OP) + modes[m]["other_threads_ir_per_op"] for m in MINE_THEIRS)
    what = "Per tiny op: instructions added on all threads (the drain included) while the ops run, "
    what += "vs torch.profiler's"
    return what, versus(ours, theirs, ours / theirs, plus=""), ours / theirs <= 0.6


@row("op-whole", "callgrind", "≤ 0.6×")
def op_whole(results):
    whole = results["callgrind"]["whole"]
    ours, theirs = (added(whole, m, "ir_per_op") for m in MINE_THEIRS)
    what = "Per tiny op: the whole run until the trace file is written, all threads, vs "
    what += "torch.profiler's (its stop and export included)"
    return what, versus(ours, theirs, ours / theirs, plus=""), ours / theirs <= 0.6


@row("module", "callgrind", "—")
def module_call(results):
    mlp = results["callgrind"]["mlp"]
    per_call = (mlp["fqntrace"][STEP] - mlp["fqntrace_nohooks"][STEP]) / MLP_MODULE_CALLS
    what = "Per module call (`nn.Module.__call__`): loop-thread instructions (P1's MLP step with − "
    what += f"without module scopes, ÷ its {MLP_MODULE_CALLS} calls; thread CPU readings below)"
    return what, f"~{f(per_call)}", None


@row("mlp-wall", "p1", "≤ 1.5×")
def mlp_wall(results):
    s = results["p1"]["summary"]
    mlp, target = s["mlp"], s["targets"]["mlp_vs_empty"]
    slowdowns = (mlp["fqntrace"]["slowdown_pct"], mlp["empty"]["slowdown_pct"])
    what = "Small MLP step (P1: 4 Linear(16, 16) + 3 ReLU, batch 8, forward and backward): wall "
    what += "slowdown, vs the empty observer's"
    return what, versus(*slowdowns, target["value"], unit=" %", digits=1), target["met"]


@row("mlp-ir", "callgrind", "≤ 1.5×")
def mlp_ir(results):
    what = "… loop-thread instructions added per step, vs the empty observer's (callgrind)"
    return what, *vs_empty(results["callgrind"]["mlp"], STEP, 1.5)


@row("sample-op", "callgrind", "≤ 10 %")
def sample_op(results):
    modes = results["callgrind"]["modes"]
    ours, floor = added(modes, "fqntrace_sampled", OP), added(modes, "empty", OP)
    what = "Sampled mode (`FQNTRACE_SAMPLE=0.01`): loop-thread instructions added per tiny op, vs "
    what += "the empty observer's (callgrind)"
    measured = f"{f(ours, sign=True)} vs +{f(floor)}: **{pct(100 * ours / floor)}**"
    return what, measured, ours / floor <= 0.10


def mlp_added(results, mode):
    """(instructions added per MLP step, the same in % of the baseline's) of a callgrind mode."""
    mlp = results["callgrind"]["mlp"]
    return added(mlp, mode, STEP), 100 * (mlp[mode][STEP] / mlp["baseline"][STEP] - 1)


@row("sample-mlp", "callgrind", "≤ 2 %")
def sample_mlp(results):
    ours, ours_pct = mlp_added(results, "fqntrace_sampled")
    base = results["callgrind"]["mlp"]["baseline"][STEP]
    what = "… P1's small MLP step: loop-thread instructions added per step (callgrind; the empty "
    what += f"observer {pct(mlp_added(results, 'empty')[1])}, the full trace "
    what += f"{pct(mlp_added(results, 'fqntrace')[1])})"
    return what, f"{f(ours, sign=True)} on {f(base)}: **{pct(ours_pct)}**", ours_pct <= 2


@row("sample-mlp-limit", "callgrind", "—")
def sample_mlp_limit(results):
    (both, both_pct), (ops, ops_pct) = (mlp_added(results, m) for m in EMPTY_SAMPLED)
    what = (
        "… the limit under it: the sampled mode's two callbacks doing nothing (`empty_sampled`); "
        "one callback on ops alone, sampled at 0.01, doing nothing (`empty_sampled_ops`, the "
        "least any op sampler costs)"
    )
    measured = f"{f(both, sign=True)} (**{pct(both_pct)}**); {f(ops, sign=True)} ({pct(ops_pct)})"
    return what, measured, None


@row("p2-ab", "p2", "≤ 3 %")
def p2_ab(results):
    a = results["p2"]["ab"]["summary"]
    ranges = f(a["events_per_step"])
    what = f"Transformer training step (P2: ~{ranges} ranges a step), in-process A/B"
    return what, before_after(a["baseline_ms"], a["fqntrace_ms"], a["slowdown_pct"], 1), a["met"]


def by_hand(results):
    """The rows of bench/measured_by_hand.toml, as written there."""
    return [
        Row(part=None, **{k: r.get(k) for k in Row._fields if k != "part"}) for r in BY_HAND["row"]
    ]


ROWS.append(by_hand)


@row("ddp", "ddp", "≤ 3 %")
def ddp(results):
    d = results["ddp"]
    change = 100 * d["target"]["value"]
    measured = before_after(d["untraced_ms_median"], d["traced_ms_median"], change, 2)
    what = "DDP, 2 gloo ranks on 2 cores (P8): in-process A/B, median over jobs"
    return what, measured, d["target"]["met"]


@row("ddp-ir", "callgrind", "≤ 3 %")
def ddp_ir(results):
    steps, key = results["callgrind"]["ddp_step"], "all_threads_ir_per_step"
    base = steps["baseline"][key]
    ours, floor = (added(steps, m, key) / base for m in ("fqntrace_rank", "empty"))
    measured = f"**{pct(100 * ours)}** (the empty observer alone: {pct(100 * floor)})"
    what = "… P8's step by instructions, all threads, as a rank traces it (P8c)"
    return what, measured, ours <= 0.03


def drain_target(results, name):
    """A P7 target, None when its run measured nothing."""
    target = results["drain"]["targets"][name]
    return None if target.get("value") is None else target


@row("drain", "drain", "≤ 100 ns")
def drain_ns(results):
    what = "The drain thread: CPU per op event (P7, tiny-op loop; on top of the callbacks' cost)"
    return what, *bold(results["drain"]["targets"]["drain_ns"], unit=" ns")


@row("exporters", "p4", "≥ 2 M")
def exporters(results):
    p4 = results["p4"]
    rate = p4["targets"]["events_per_s"]
    at_once = f(p4["formats"].get("all", {}).get("cpu_events_per_s_median", 0) / 1e6, 2)
    measured = f"**{f(rate['value'] / 1e6, 2)} M** (all three formats at once: {at_once} M)"
    return "The drain's exporters: events/s on one core, slowest format (P4)", measured, rate["met"]


@row("gzip-tiny", "drain", "≤ 1.5×")
def gzip_tiny(results):
    if g := drain_target(results, "gzip_ratio"):
        what = (
            "The drain with gzip (`FQNTRACE=….json.gz`), CPU per event vs plain: tiny-op loop (P7)"
        )
        return what, f"{bold(g, 2, '×')[0]} ({f(g['gzip_ns'])} ns)", g["met"]


@row("gzip-train", "drain", "≤ 1.5×")
def gzip_train(results):
    if g := drain_target(results, "gzip_train_ratio"):
        measured = f"{bold(g, 2, '×')[0]} ({f(g['gzip_ns'])} vs {f(g['plain_ns'])} ns)"
        return "… a training loop (P7, `--workload train`)", measured, g["met"]


@row("gzip-mix", "p4", "≤ 1.5×")
def gzip_mix(results):
    what = "The drain with gzip, CPU per event vs plain: the exporter benchmark's mix (P4)"
    return what, *bold(results["p4"]["targets"]["gzip_drain_cost_ratio"], 2, "×")


@row("bytes-mix", "p4", "≤ 200")
def bytes_mix(results):
    what = (
        "Trace bytes per event, Chrome, the exporter mix (P4: a transformer step, flows, no shapes)"
    )
    return what, *bold(results["p4"]["targets"]["chrome_bytes_per_event"], 1)


@row("bytes-demo", "drain", "≤ 150")
def bytes_demo(results):
    if demo := results["drain"]["targets"].get("demo_bytes"):
        return "… per op event on the demo (P4b: file bytes ÷ `cpu_op` events)", *bold(demo, 1)


@row("bytes-loop", "drain", "—")
def bytes_loop(results):
    cpu, gz = results["drain"].get("cpu"), results["drain"]["targets"].get("gzip_ratio")
    if cpu and gz:
        measured = f"{f(cpu['bytes_per_op'], 1)}; `.json.gz` **{f(gz['gzip_bytes_per_op'], 1)}**"
        return "… per op event of the tiny-op loop, plain and gzip (P7)", measured, None


@row("p5", "p5", "≤ 32 MB, flat")
def p5_memory(results):
    ours, theirs = results["p5"]["fqntrace"], results["p5"]["profiler"]
    what = f"Memory while tracing {f(ours['ops'])} ops to disk (P5): RSS growth after warm-up"
    measured = (
        f"**{f(ours['max_growth_after_warmup_mb'], 1)} MB**, {'flat' if ours['flat'] else 'not flat'} "
        f"(torch.profiler: {f(theirs['mb_per_million_ops'], 0)} MB per million ops)"
    )
    return what, measured, ours["met"]


@row("p6", "p1", "no callback, within noise")
def p6_loaded_off(results):
    p6 = results["p1"]["summary"]["p6"]
    modes = (results.get("callgrind") or {}).get("modes") or {}
    ir = ""
    if "loaded_off" in modes and "baseline" in modes:
        ir = f", {f(added(modes, 'loaded_off', OP), sign=True)} instructions"
    measured = (
        f"session {'running' if p6['running'] else 'off'}, "
        f"{'a' if p6['global_callbacks'] else 'no'} RecordFunction callback; "
        f"{f(p6['added_ns'], sign=True)} ns per op (noise ±{f(p6['noise_ns'])}){ir}"
    )
    met = not p6["running"] and not p6["global_callbacks"] and p6["within_noise"]
    return "Library loaded, `FQNTRACE` unset (P6)", measured, met


@row("p3", "p3", "≤ 0.5×")
def p3_modtracker(results):
    s = results["p3"]["summary"]
    ours, theirs = (f(s["variants"][v]["added_ms"], 2, sign=True) for v in MODTRACKERS)
    measured = f"{ours} vs {theirs} ms a step: **{f(s['target']['value'], 2)}×**"
    what = "`fqntrace.ModTracker` vs torch's `ModTracker` (P3: 200 modules), added time"
    return what, measured, s["target"]["met"]


def cli_verbs(results):
    """P9's rows, a verb each, from the run at the largest size; a verb that meets its target
    there but missed it at a smaller size says so."""
    runs = cli_runs(results)
    big = runs.get(max(CLI_DOC_SIZES))
    if not big:
        return []
    size, command = cli_size(big["mb"]), f"`scripts/bench.sh --cli {big['mb']}`"
    others = [runs[mb] for mb in CLI_DOC_SIZES if mb != big["mb"] and mb in runs]
    rows = []
    for verb in dict.fromkeys(r["verb"] for r in big["rows"]):
        got = [r for r in big["rows"] if r["verb"] == verb]
        cpu = ", ".join(f"{r['cpu_s']:.1f} s ({r['format']})" for r in got)
        rates = ", ".join(kilo(r["events_per_cpu_s"]) for r in got)
        peaks = ", ".join(f"{r['peak_rss_mib']:.0f}" for r in got)
        measured = f"{cpu}: {rates} events/CPU-s; peak {peaks} MiB"
        rid, met = f"cli-{verb.split()[0]}", all(r["met"] for r in got)
        for o in others if met else []:  # the first smaller run where the verb missed
            if rs := [r for r in o["rows"] if r["verb"] == verb and r["met"] is False]:
                rates = ", ".join(f"{kilo(r['events_per_cpu_s'])} ({r['format']})" for r in rs)
                reason = REASONS.get(rid, "see Notes")
                measured += f"; {cli_size(o['mb'])} run: {rates}, **no** — {reason}"
                break
        both = "; two traces, both counted" if verb in ("merge", "diff") else ""
        what = f"`python -m fqntrace {verb}` on a {size} trace (P9{both})"
        target = f"≥ {got[0]['target'] / 1e3:,.0f} k events/CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB"
        rows.append(Row(rid, f"cli-{big['mb']}", what, measured, target, met, command))
    return rows


ROWS.append(cli_verbs)
