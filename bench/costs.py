"""The table docs/benchmarks.md opens with: what fqntrace costs, each row against its target, from
bench/measured.json's parts and bench/measured_by_hand.toml's rows, with the date that measured
it and the command that measures it again. A row measured before the code it describes last
changed (CODE, by `git log`) goes to the table below it instead (costs-stale), dated. Also the
number formatting bench/doc_tables.py's other tables share.
"""

import datetime
import functools
import os
import subprocess

import tomllib
from modes import CLI_DOC_SIZES, CLI_RSS_LIMIT_MIB

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def f(value, digits=0, sign=False):
    if value is None:
        return "n/a"
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def day(date):
    return (date or "?")[:10]


def cli_runs(results):
    """{MiB: numbers} of `scripts/bench.sh --cli MiB`'s last runs (the parts cli-MiB)."""
    return {mb: results[f"cli-{mb}"] for mb in CLI_DOC_SIZES if f"cli-{mb}" in results}


def cli_size(mb):
    return f"{mb // 1024} GiB" if mb % 1024 == 0 else f"{mb} MiB"


# bench/measured_by_hand.toml: "reasons" {row id: why it misses}, "newer" {row id: {date, text}},
# "row" [rows measured by hand].
with open(os.path.join(HERE, "measured_by_hand.toml"), "rb") as fh:
    BY_HAND = {"reasons": {}, "newer": {}, "row": [], **tomllib.load(fh)}
REASONS = BY_HAND["reasons"]

# run_mode.make_mlp: nn.Sequential of 4 Linear and 3 ReLU, 8 module calls a step.
MLP_MODULE_CALLS = 8


# The code each measurement describes (paths for `git log`): a row measured before that code
# last changed is not shown in the opening table but below it, dated, until a run measures it
# again (parts: PART_CODE; rows measured by hand: their `code`).
CODE = {
    "tracer": (
        "plugin",
        "record_function",
        "buffer",
        "drain",
        "exporters",
        "binding",
        "include",
        "python/fqntrace/_hooks.py",
    ),
    "exporters": ("buffer", "drain", "exporters", "tests/support", "bench/exporter_bench"),
    "trackers": (
        "plugin",
        "record_function",
        "buffer",
        "binding",
        "python/fqntrace/_hooks.py",
        "python/fqntrace/_mod_tracker.py",
    ),
    "cli": ("python/fqntrace/analysis", "analysis"),
}
PART_CODE = {
    "p1": "tracer",
    "p2": "tracer",
    "p3": "trackers",
    "p4": "exporters",
    "p5": "tracer",
    "memory": "tracer",
    "drain": "tracer",
    "ddp": "tracer",
    "callgrind": "tracer",
    "cli-300": "cli",
    "cli-1024": "cli",
}


@functools.cache
def code_changed(code):
    """The time of the last commit that touched CODE[code], leaving out the commits named in
    .git-blame-ignore-revs (layout and comment-only changes, which change no measured code)."""
    out = subprocess.run(
        ["git", "-C", ROOT, "log", "--no-merges", "--format=%H %cI", "--", *CODE[code]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    ignored = ignored_revisions()
    for line in out:
        rev, _, when = line.partition(" ")
        if rev and rev not in ignored:
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
    fresh, _ = cost_rows(results)
    return "\n".join(
        ["| what | measured | target | met | date | command |", "|---|---|---|---|---|---|", *fresh]
    )


def stale_costs_table(results):
    """The rows of the opening table measured before the code they describe last changed."""
    _, stale = cost_rows(results)
    if not stale:
        return "No row of the opening table was measured before its code last changed."
    return "\n".join(
        [
            "| what | measured | target | met | date | code last changed | command |",
            "|---|---|---|---|---|---|---|",
            *stale,
        ]
    )


def cost_rows(results):
    """(fresh rows, stale rows) of the opening table, as Markdown lines."""
    results = results or {}
    fresh, stale = [], []

    def row(rid, part, what, measured, target, met, command=None, date=None, code=None):
        date = date or results[part]["run"]["date"]
        newer = BY_HAND["newer"].get(rid)
        if newer and newer["date"] > day(date):
            measured += f"; by hand on {newer['date']}: {newer['text']}"
        verdict = (
            "—" if met is None else "yes" if met else f"**no** — {REASONS.get(rid, 'see Notes')}"
        )
        command = command or f"`bench/driver.py --only {part}`"
        changed = code_changed(code or PART_CODE[part])
        if measured_at(date) >= changed:
            fresh.append(
                f"| {what} | {measured} | {target} | {verdict} | {day(date)} | {command} |"
            )
        else:
            stale.append(
                f"| {what} | {measured} | {target} | {verdict} | {day(date)} | "
                f"{changed.date().isoformat()} | {command} |"
            )

    def vs_empty(rid, table, key, what, limit):
        """Instructions fqntrace adds against the empty observer's, from a callgrind table."""
        b = table["baseline"][key]
        ours, floor = table["fqntrace"][key] - b, table["empty"][key] - b
        row(
            rid,
            "callgrind",
            what,
            f"+{f(ours)} vs +{f(floor)}: **{f(ours / floor, 2)}×**",
            f"≤ {limit}×",
            ours / floor <= limit,
        )

    cg = results.get("callgrind") or {}
    modes, mlp_ir = cg.get("modes") or {}, cg.get("mlp") or {}
    if "p1" in results:
        s = results["p1"]["summary"]
        o, t, r = s["ops"], s["targets"], s["ratios"]
        fq = o["fqntrace"]
        row(
            "op-empty",
            "p1",
            "Per tiny op (`torch.add`, 4 elements): wall time added, vs the empty observer's",
            f"+{f(fq['added_ns'])} ns vs +{f(o['empty']['added_ns'])} ns: "
            f"**{f(t['ops_vs_empty']['value'], 2)}×** (best samples "
            f"{f(r.get('best_fqntrace_over_empty_added_ns'), 2)}×)",
            "≤ 1.5×",
            t["ops_vs_empty"]["met"],
        )
        row(
            "op-profiler",
            "p1",
            "… vs torch.profiler's (CPU)",
            f"+{f(fq['added_ns'])} ns vs +{f(o['profiler']['added_ns'])} ns: "
            f"**{f(t['ops_vs_profiler']['value'], 2)}×** (with_stack: +{f(o['profiler_stack']['added_ns'])} ns)",
            "≤ 0.5×",
            t["ops_vs_profiler"]["met"],
        )
    if all(m in modes for m in ("baseline", "empty", "fqntrace")):
        vs_empty(
            "op-ir",
            modes,
            "main_thread_ir_per_op",
            "Per tiny op: loop-thread instructions added, vs the empty observer's (callgrind)",
            1.25,
        )
        key = "main_thread_ir_per_op"
        b = modes["baseline"][key]
        ours = modes["fqntrace"][key] - b
        if "profiler" in modes:
            ours_all = ours + modes["fqntrace"]["other_threads_ir_per_op"]
            theirs = modes["profiler"][key] - b + modes["profiler"]["other_threads_ir_per_op"]
            row(
                "op-all",
                "callgrind",
                "Per tiny op: instructions added on all threads (the drain "
                "included) while the ops run, vs torch.profiler's",
                f"{f(ours_all)} vs {f(theirs)}: **{f(ours_all / theirs, 2)}×**",
                "≤ 0.6×",
                ours_all / theirs <= 0.6,
            )
    whole = cg.get("whole") or {}
    if all(m in whole for m in ("baseline", "fqntrace", "profiler")):
        b = whole["baseline"]["ir_per_op"]
        ours, theirs = whole["fqntrace"]["ir_per_op"] - b, whole["profiler"]["ir_per_op"] - b
        row(
            "op-whole",
            "callgrind",
            "Per tiny op: the whole run until the trace file is written, "
            "all threads, vs torch.profiler's (its stop and export included)",
            f"{f(ours)} vs {f(theirs)}: **{f(ours / theirs, 2)}×**",
            "≤ 0.6×",
            ours / theirs <= 0.6,
        )
    if all(m in mlp_ir for m in ("fqntrace", "fqntrace_nohooks")):
        key = "main_thread_ir_per_step"
        per_call = (mlp_ir["fqntrace"][key] - mlp_ir["fqntrace_nohooks"][key]) / MLP_MODULE_CALLS
        row(
            "module",
            "callgrind",
            "Per module call (`nn.Module.__call__`): loop-thread instructions "
            f"(P1's MLP step with − without module scopes, ÷ its {MLP_MODULE_CALLS} calls; thread CPU "
            "readings below)",
            f"~{f(per_call)}",
            "—",
            None,
        )
    if "p1" in results:
        m, t = results["p1"]["summary"]["mlp"], results["p1"]["summary"]["targets"]
        row(
            "mlp-wall",
            "p1",
            "Small MLP step (P1: 4 Linear(16, 16) + 3 ReLU, batch 8, forward and "
            "backward): wall slowdown, vs the empty observer's",
            f"+{f(m['fqntrace']['slowdown_pct'], 1)} % vs +{f(m['empty']['slowdown_pct'], 1)} %: "
            f"**{f(t['mlp_vs_empty']['value'], 2)}×**",
            "≤ 1.5×",
            t["mlp_vs_empty"]["met"],
        )
    if all(m in mlp_ir for m in ("baseline", "empty", "fqntrace")):
        vs_empty(
            "mlp-ir",
            mlp_ir,
            "main_thread_ir_per_step",
            "… loop-thread instructions added per step, vs the empty observer's (callgrind)",
            1.5,
        )
    if all(m in modes for m in ("baseline", "empty", "fqntrace_sampled")):
        key = "main_thread_ir_per_op"
        b = modes["baseline"][key]
        ours, floor = modes["fqntrace_sampled"][key] - b, modes["empty"][key] - b
        row(
            "sample-op",
            "callgrind",
            "Sampled mode (`FQNTRACE_SAMPLE=0.01`): loop-thread "
            "instructions added per tiny op, vs the empty observer's (callgrind)",
            f"{f(ours, sign=True)} vs +{f(floor)}: **{f(100 * ours / floor, 1, sign=True)} %**",
            "≤ 10 %",
            ours / floor <= 0.10,
        )
    if all(m in mlp_ir for m in ("baseline", "empty", "fqntrace", "fqntrace_sampled")):
        key = "main_thread_ir_per_step"
        b = mlp_ir["baseline"][key]

        def added(mode):
            return mlp_ir[mode][key] - b, 100 * (mlp_ir[mode][key] / b - 1)

        ours, pct = added("fqntrace_sampled")
        row(
            "sample-mlp",
            "callgrind",
            "… P1's small MLP step: loop-thread instructions added per "
            f"step (callgrind; the empty observer {f(added('empty')[1], 1, sign=True)} %, the full "
            f"trace {f(added('fqntrace')[1], 1, sign=True)} %)",
            f"{f(ours, sign=True)} on {f(b)}: **{f(pct, 1, sign=True)} %**",
            "≤ 2 %",
            pct <= 2,
        )
        if all(m in mlp_ir for m in ("empty_sampled", "empty_sampled_ops")):
            (both, both_pct), (ops, ops_pct) = added("empty_sampled"), added("empty_sampled_ops")
            row(
                "sample-mlp-limit",
                "callgrind",
                "… the limit under it: the sampled mode's two "
                "callbacks doing nothing (`empty_sampled`); one callback on ops alone, sampled at "
                "0.01, doing nothing (`empty_sampled_ops`, the least any op sampler costs)",
                f"{f(both, sign=True)} (**{f(both_pct, 1, sign=True)} %**); {f(ops, sign=True)} "
                f"({f(ops_pct, 1, sign=True)} %)",
                "—",
                None,
            )
    p2 = results.get("p2") or {}
    if p2.get("ab"):
        a = p2["ab"]["summary"]
        row(
            "p2-ab",
            "p2",
            f"Transformer training step (P2: ~{f(a['events_per_step'])} ranges a step), "
            "in-process A/B",
            f"{f(a['baseline_ms'], 1)} → {f(a['fqntrace_ms'], 1)} ms: "
            f"**{f(a['slowdown_pct'], 1, sign=True)} %**",
            "≤ 3 %",
            a["met"],
        )
    if "summary" in p2:
        row(
            "p2-procs",
            "p2",
            "… the same, traced and untraced in separate processes",
            f"**{f(p2['summary']['slowdown_pct'], 1, sign=True)} %**",
            "≤ 3 %",
            p2["summary"]["met"],
        )
    for r in BY_HAND["row"]:
        row(
            r["id"],
            None,
            r["what"],
            r["measured"],
            r["target"],
            r.get("met"),
            r["command"],
            r["date"],
            r["code"],
        )
    d = results.get("ddp")
    if d:
        row(
            "ddp",
            "ddp",
            "DDP, 2 gloo ranks on 2 cores (P8): in-process A/B, median over jobs",
            f"{f(d['untraced_ms_median'], 2)} → {f(d['traced_ms_median'], 2)} ms: "
            f"**{f(100 * d['target']['value'], 1, sign=True)} %**",
            "≤ 3 %",
            d["target"]["met"],
        )
    steps = cg.get("ddp_step") or {}
    if all(m in steps for m in ("baseline", "empty", "fqntrace_rank")):
        base = steps["baseline"]["all_threads_ir_per_step"]
        ours = steps["fqntrace_rank"]["all_threads_ir_per_step"] / base - 1
        floor = steps["empty"]["all_threads_ir_per_step"] / base - 1
        row(
            "ddp-ir",
            "callgrind",
            "… P8's step by instructions, all threads, as a rank traces it (P8c)",
            f"**{f(100 * ours, 1, sign=True)} %** (the empty observer alone: "
            f"{f(100 * floor, 1, sign=True)} %)",
            "≤ 3 %",
            ours <= 0.03,
        )
    drain = results.get("drain") or {}
    t = drain.get("targets") or {}
    if t:
        row(
            "drain",
            "drain",
            "The drain thread: CPU per op event (P7, tiny-op loop; on top of the callbacks' cost)",
            f"**{f(t['drain_ns']['value'])} ns**",
            "≤ 100 ns",
            t["drain_ns"]["met"],
        )
    p4 = results.get("p4") or {}
    if "targets" in p4:
        fm = p4["formats"]
        row(
            "exporters",
            "p4",
            "The drain's exporters: events/s on one core, slowest format (P4)",
            f"**{f(p4['targets']['events_per_s']['value'] / 1e6, 2)} M** (all three formats at once: "
            f"{f(fm.get('all', {}).get('cpu_events_per_s_median', 0) / 1e6, 2)} M)",
            "≥ 2 M",
            p4["targets"]["events_per_s"]["met"],
        )
    if t.get("gzip_ratio", {}).get("value") is not None:
        g = t["gzip_ratio"]
        row(
            "gzip-tiny",
            "drain",
            "The drain with gzip (`FQNTRACE=….json.gz`), CPU per event vs plain: tiny-op loop (P7)",
            f"**{f(g['value'], 2)}×** ({f(g['gzip_ns'])} ns)",
            "≤ 1.5×",
            g["met"],
        )
    if t.get("gzip_train_ratio", {}).get("value") is not None:
        g = t["gzip_train_ratio"]
        row(
            "gzip-train",
            "drain",
            "… a training loop (P7, `--workload train`)",
            f"**{f(g['value'], 2)}×** ({f(g['gzip_ns'])} vs {f(g['plain_ns'])} ns)",
            "≤ 1.5×",
            g["met"],
        )
    if "gzip_drain_cost_ratio" in p4.get("targets", {}):
        gz = p4["targets"]["gzip_drain_cost_ratio"]
        row(
            "gzip-mix",
            "p4",
            "The drain with gzip, CPU per event vs plain: the exporter benchmark's mix (P4)",
            f"**{f(gz['value'], 2)}×**",
            "≤ 1.5×",
            gz["met"],
        )
    if "targets" in p4:
        b = p4["targets"]["chrome_bytes_per_event"]
        row(
            "bytes-mix",
            "p4",
            "Trace bytes per event, Chrome, the exporter mix (P4: a transformer "
            "step, flows, no shapes)",
            f"**{f(b['value'], 1)}**",
            "≤ 200",
            b["met"],
        )
    if t.get("demo_bytes"):
        row(
            "bytes-demo",
            "drain",
            "… per op event on the demo (P4b: file bytes ÷ `cpu_op` events)",
            f"**{f(t['demo_bytes']['value'], 1)}**",
            "≤ 150",
            t["demo_bytes"]["met"],
        )
    cpu = drain.get("cpu")
    if cpu and t.get("gzip_ratio"):
        row(
            "bytes-loop",
            "drain",
            "… per op event of the tiny-op loop, plain and gzip (P7)",
            f"{f(cpu['bytes_per_op'], 1)}; `.json.gz` **{f(t['gzip_ratio']['gzip_bytes_per_op'], 1)}**",
            "—",
            None,
        )
    if "p5" in results:
        p5, prof = results["p5"]["fqntrace"], results["p5"]["profiler"]
        row(
            "p5",
            "p5",
            f"Memory while tracing {f(p5['ops'])} ops to disk (P5): RSS growth after warm-up",
            f"**{f(p5['max_growth_after_warmup_mb'], 1)} MB**, "
            f"{'flat' if p5['flat'] else 'not flat'} (torch.profiler: "
            f"{f(prof['mb_per_million_ops'], 0)} MB per million ops)",
            "≤ 32 MB, flat",
            p5["met"],
        )
    m = results.get("memory")
    if m and "memory_cost" in m.get("fqntrace", {}):
        per = m["reports_per_op"]["alloc"]
        ours, theirs = m["fqntrace"]["memory_cost"], m["profiler"]["memory_cost"]
        row(
            "memory",
            "memory",
            "`FQNTRACE_MEMORY=1`: per allocator report, vs torch.profiler's `profile_memory`",
            f"**{f(ours['alloc'] / per)} ns** vs {f(theirs['alloc'] / per)} ns; "
            f"with the session's stop {f(ours['alloc_with_stop'] / per)} vs "
            f"{f(theirs['alloc_with_stop'] / per)} ns",
            "—",
            None,
        )
    if "p1" in results:
        p6 = results["p1"]["summary"]["p6"]
        extra = ""
        if "loaded_off" in modes and "baseline" in modes:
            extra = (
                f", {f(modes['loaded_off']['main_thread_ir_per_op'] - modes['baseline']['main_thread_ir_per_op'], sign=True)}"
                " instructions"
            )
        row(
            "p6",
            "p1",
            "Library loaded, `FQNTRACE` unset (P6)",
            f"session {'running' if p6['running'] else 'off'}, "
            f"{'a' if p6['global_callbacks'] else 'no'} RecordFunction callback; "
            f"{f(p6['added_ns'], sign=True)} ns per op (noise ±{f(p6['noise_ns'])}){extra}",
            "no callback, within noise",
            not p6["running"] and not p6["global_callbacks"] and p6["within_noise"],
        )
    if "p3" in results:
        p3 = results["p3"]["summary"]
        v = p3["variants"]
        row(
            "p3",
            "p3",
            "`fqntrace.ModTracker` vs torch's `ModTracker` (P3: 200 modules), added time",
            f"{f(v['fqntrace_modtracker']['added_ms'], 2, sign=True)} vs "
            f"{f(v['torch_modtracker']['added_ms'], 2, sign=True)} ms a step: "
            f"**{f(p3['target']['value'], 2)}×**",
            "≤ 0.5×",
            p3["target"]["met"],
        )
    cli = cli_runs(results)
    big = cli.get(max(CLI_DOC_SIZES))
    if big:
        size = cli_size(big["mb"])
        others = [cli[mb] for mb in CLI_DOC_SIZES if mb != big["mb"] and mb in cli]
        verbs = list(dict.fromkeys(r["verb"] for r in big["rows"]))
        for verb in verbs:
            got = [r for r in big["rows"] if r["verb"] == verb]
            first = got[0]
            duck = first.get("target") is None
            measured = (
                ", ".join(f"{r['cpu_s']:.1f} s ({r['format']})" for r in got)
                + ": "
                + ", ".join(f"{r['events_per_cpu_s'] / 1e3:,.0f} k" for r in got)
                + " events/CPU-s; peak "
                + ", ".join(f"{r['peak_rss_mib']:.0f}" for r in got)
                + " MiB"
            )
            if duck:
                row(
                    "cli-duckdb",
                    f"cli-{big['mb']}",
                    f"{verb.split(' (')[0]} on the same {size} "
                    "JSON Lines file: per fqn and phase, sum of op `dur` and count (no nesting "
                    "rule)",
                    measured,
                    "—",
                    None,
                    f"`scripts/bench.sh --cli {big['mb']}`",
                )
                continue
            met = all(r["met"] for r in got)
            target = f"≥ {first['target'] / 1e3:,.0f} k events/CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB"
            what = (
                f"`python -m fqntrace {verb}` on a {size} trace (P9"
                + ("; two traces, both counted" if verb in ("merge", "diff") else "")
                + ")"
            )
            rid = f"cli-{verb.split()[0]}"
            missed = [
                (o, [r for r in o["rows"] if r["verb"] == verb and r["met"] is False])
                for o in others
            ]
            missed = [(o, rs) for o, rs in missed if rs]
            if met and missed:
                o, rs = missed[0]
                measured += (
                    f"; {cli_size(o['mb'])} run: "
                    + ", ".join(f"{r['events_per_cpu_s'] / 1e3:,.0f} k ({r['format']})" for r in rs)
                    + f", **no** — {REASONS.get(rid, 'see Notes')}"
                )
            row(
                rid,
                f"cli-{big['mb']}",
                what,
                measured,
                target,
                met,
                f"`scripts/bench.sh --cli {big['mb']}`",
            )
    return fresh, stale
