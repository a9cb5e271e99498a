"""Fills the generated sections of docs/benchmarks.md from bench/measured.json (the last run of
each part) and bench/measured_by_hand.toml (what was measured by hand), and prints a terminal
summary.

    .venv/bin/python bench/doc_tables.py [bench/measured.json] [docs/benchmarks.md]

docs/benchmarks.md is hand-written, except between marker lines

    <!-- generated:begin NAME -->
    <!-- generated:end NAME -->

whose content is SECTIONS[NAME](results): tables and numbers (the opening table and the rows
below it measured before their code changed: bench/costs.py; the runs, the settings and the
parts' tables: here). The analysis around the tables is prose that this module never touches
(bench/driver.py runs it after every benchmark run, so re-read the prose, and the reasons, when
the numbers change). A section without data says so in one line.
"""

import argparse
import os
import re

import measured
import modes
from costs import cli_runs, cli_size, costs_table, f, kilo, pct, stale_costs_table, table
from modes import CLI_RSS_LIMIT_MIB
from modes import LABELS_BY_MODE as LABELS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")

# ---------------------------------------------------------------------------------------------
# Filling the document


MARKER = re.compile(
    r"^<!-- generated:begin (?P<name>[a-z0-9-]+) -->\n(?P<body>.*?)"
    r"^<!-- generated:end (?P=name) -->$",
    re.M | re.S,
)


def update(doc, results, only=None):
    """`doc` with every generated section's content replaced from `results` (only: just the
    sections named there); the rest as it is. Raises ValueError for a section name this module
    does not know, one it knows that the document lacks (so a renamed section never goes stale
    unnoticed), or one the document has twice."""
    seen = set()

    def fill(match):
        name = match.group("name")
        if name not in SECTIONS:
            known = ", ".join(SECTIONS)
            raise ValueError(
                f"docs/benchmarks.md: unknown generated section {name!r} (known: {known})"
            )
        if name in seen:
            raise ValueError(f"docs/benchmarks.md: the generated section {name!r} twice")
        seen.add(name)
        if only is not None and name not in only:
            return match.group(0)
        content = SECTIONS[name](results) or "*Not measured in this run.*"
        return f"<!-- generated:begin {name} -->\n{content}\n<!-- generated:end {name} -->"

    out = MARKER.sub(fill, doc)
    missing = [name for name in (SECTIONS if only is None else only) if name not in seen]
    if missing:
        lacks = f"docs/benchmarks.md lacks the generated sections {', '.join(missing)}"
        raise ValueError(lacks + "; add their marker lines where the tables belong")
    return out


def update_file(results, doc=DOC, only=None):
    """update() on the document file, in place."""
    with open(doc) as fh:
        text = update(fh.read(), results, only)
    with open(doc, "w") as fh:
        fh.write(text)


# ---------------------------------------------------------------------------------------------
# Sections: each returns Markdown, or None when the results have nothing for it.


# The parts of bench/measured.json, in the run table's order, with what each measures
# (`bench/driver.py --only PART`; the cli parts: `scripts/bench.sh --cli MiB`).
PARTS = {
    "p1": "P1 per op and MLP step, P6",
    "p2": "P2 transformer step",
    "p3": "P3 ModTracker",
    "p4": "P4 exporters",
    "p5": "P5 memory and trace size",
    "drain": "P7 drain CPU, P4b",
    "ddp": "P8 DDP",
    "callgrind": "instructions (callgrind), P8c",
    "cli-1024": "P9 the CLI, 1 GiB",
    "cli-300": "P9 the CLI, 300 MiB",
}


def minute(date):
    return (date or "?")[:16].replace("T", " ")


def run_section(results):
    m = results["machine"]
    torch = sorted({results[part]["run"]["torch"] for part in PARTS if part in results})
    machine = (
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('mem_total_gb')} GB, Linux "
        f"{m.get('kernel')}, Python {m.get('python')}, torch {', '.join(torch)}; shared with "
        "other work, so times are noisy (instruction counts are not). Each part's numbers "
        "are from its last run; a quick run (`scripts/bench.sh --quick`) has few rounds and "
        "rough numbers. Summaries: `bench/measured.json`; a run's raw samples go to "
        "`build/bench/raw/`."
    )
    groups = {}  # parts last measured by the same run share a row
    for part in (part for part in PARTS if part in results):
        run = results[part]["run"]
        key = (run["date"], run["git_commit"], run["kind"], *run["loadavg"])
        groups.setdefault(key, []).append(part)
    rows = []
    for (date, commit, kind, *load), parts in groups.items():
        load = " → ".join("—" if x is None else f"{x:.2f}" for x in load)
        measures = "; ".join(PARTS[p] for p in parts)
        rows.append([", ".join(parts), measures, minute(date), commit, kind, load])
    head = "part|measures|last run (UTC)|commit|run|load average, start → end"
    return machine + "\n\n" + table(head, rows)


def settings_section(results):
    """The sizes of the last run's measurements, one line per benchmark."""
    lines = []
    if p1 := results.get("p1"):
        lines.append(
            f"- P1: {f(p1['ops_per_sample'])} `torch.add` calls per sample, "
            f"{f(p1['samples_per_process'])} samples per process after one warm-up sample, "
            f"{f(p1['rounds'])} rounds; the MLP {f(p1['mlp_steps_per_sample'])} steps per sample."
        )
    if p2 := results.get("p2"):
        text = (
            f"- P2: `{p2['model']}`, batch {f(p2['batch'])}, {p2['optimizer']}, "
            f"{f(p2['threads'])} thread; {f(p2['warmup_steps'])} warm-up steps."
        )
        if ab := p2.get("ab"):
            text += (
                f" A/B: {f(ab['processes'])} processes × {f(ab['blocks'])} "
                f"blocks of {f(ab['steps_per_block'])} steps."
            )
        lines.append(text)
    if p3 := results.get("p3"):
        lines.append(
            f"- P3: {p3['model']}; {f(p3['threads'])} thread, {f(p3['processes'])} processes "
            f"× {f(p3['rounds'])} rounds, {f(p3['steps_per_sample'])} steps of every variant "
            "per round."
        )
    if "formats" in (p4 := results.get("p4", {})):
        ctx = p4.get("context", {})
        lines.append(
            f"- P4: {f(p4['formats'].get('chrome', {}).get('events_per_step'))} raw events "
            f"per training step; {f(p4['repetitions'])} repetitions interleaved at random, "
            f"≥ {p4['min_time_s']} s each; {ctx.get('num_cpus', '?')} CPUs at "
            f"{ctx.get('mhz_per_cpu', '?')} MHz as Google Benchmark sees them."
        )
    if "modes" in (cg := results.get("callgrind") or {}):
        lines.append(
            f"- Callgrind: {f(cg['ops'])} `torch.add` calls and {f(cg.get('mlp_steps'))} "
            "MLP steps per mode."
        )
    return "\n".join(lines) or None


# The parts' tables, P1-P8.

FORMAT_LABELS = {"chrome": "Chrome trace", "jsonl": "JSON Lines", "summary": "per-module summary"}
FORMAT_LABELS["all"] = "all three at once"


def spread(iqr, digits=0, sign=False, unit=""):
    """An IQR as the tables show it: '(low … high)'."""
    return f"({f(iqr[0], digits, sign)} … {f(iqr[1], digits, sign)}{unit})"


def with_added(value, added, digits=0, base=False):
    """'value (+added)', the value alone for the baseline."""
    return f(value, digits) + ("" if base else f" ({f(added, digits, sign=True)})")


def unless_base(base, text):
    """A cell that the baseline's row leaves empty ('—')."""
    return "—" if base else text


def p1_section(results):
    if not (p1 := results.get("p1")):
        return None
    rows = []
    for m in p1["modes"]:
        o, mlp, base = p1["summary"]["ops"][m], p1["summary"]["mlp"][m], m == "baseline"
        added = unless_base(base, f"**{f(o['added_ns'], sign=True)}**")
        cpu = with_added(o["thread_cpu_ns"], o.get("thread_cpu_added_ns"), base=base)
        best = with_added(o["best_ns"], o.get("best_added_ns"), base=base)
        ns = f"{f(o['ns_per_op'])} {spread(o['iqr_ns'])}"
        ops = [ns, added, cpu, f(o["process_cpu_ns"]), best]
        step = f"{f(mlp['us_per_step'], 1)} {spread(mlp['iqr_us'], 1)}"
        slowdowns = [f"**{pct(mlp['slowdown_pct'])}**", pct(mlp["best_slowdown_pct"])]
        rows.append([LABELS[m], *ops, step, *(unless_base(base, text) for text in slowdowns)])
    head = "mode|ns/op (IQR over rounds)|added ns/op|loop-thread CPU ns/op (added)"
    head += "|process CPU ns/op|best sample ns/op (added)|MLP µs/step (IQR)|MLP slowdown"
    head += "|MLP slowdown, best samples"
    return table(head, rows, "lr")


def callgrind_ops(results):
    if not (by_mode := (results.get("callgrind") or {}).get("modes")):
        return None
    base = by_mode["baseline"]["main_thread_ir_per_op"]
    rows = []
    for m in (m for m in modes.CALLGRIND_OPS_MODES if m in by_mode):
        r, ir = by_mode[m], by_mode[m]["main_thread_ir_per_op"]
        callbacks = "—"
        if "on_start_ir_per_op" in r:
            callbacks = f"{f(r['on_start_ir_per_op'])} + {f(r['on_end_ir_per_op'])}"
        added = unless_base(m == "baseline", f(ir - base, sign=True))
        rows.append([LABELS[m], f(ir), added, f(r["other_threads_ir_per_op"]), callbacks])
    head = "mode|loop thread instructions/op|added vs baseline"
    head += "|other threads (drain) instructions/op|fqntrace on_start + on_end (inclusive)"
    return table(head, rows, "lr")


def callgrind_mlp(results):
    mlp = (results.get("callgrind") or {}).get("mlp")
    if not mlp or "baseline" not in mlp:
        return None
    base = mlp["baseline"]["main_thread_ir_per_step"]
    rows = []
    for m in (m for m in modes.CALLGRIND_MLP_MODES if m in mlp):
        v, is_base = mlp[m]["main_thread_ir_per_step"], m == "baseline"
        added = [f(v - base, sign=True), pct(100 * (v / base - 1))]
        added = [unless_base(is_base, text) for text in added]
        rows.append([LABELS[m], f(v), *added, f(mlp[m]["other_threads_ir_per_step"])])
    head = "mode|instructions/step|added vs baseline|% of baseline|other threads/step"
    return table(head, rows, "lr")


def p2_ab_section(results, key="ab"):
    if not (ab := results.get("p2", {}).get(key)):
        return None
    a = ab["summary"]
    groups = f"{pct(a.get('group_slowdown_pct_median'))} "
    groups += spread(a["group_slowdown_pct_iqr"], 1, True, f" %, {a.get('groups')} groups")
    traced = ["traced (fqntrace.profile)", f(a["fqntrace_ms"], 1), f"**{pct(a['slowdown_pct'])}**"]
    traced += [", ".join(map(pct, a["per_process_slowdown_pct"])), groups]
    untraced = ["untraced", f(a["baseline_ms"], 1), *["—"] * 4]
    head = "arm|ms/step (median of all steps)|slowdown|per process|per A B B A group: median (IQR)"
    head += "|best step vs best step"
    return table(head, [untraced, [*traced, pct(a["best_slowdown_pct"])]], "lr")


def p3_section(results):
    if not (p3 := results.get("p3")):
        return None
    rows = []
    for v in p3["variants"]:
        r, base = p3["summary"]["variants"][v], v == "none"
        step = f"{f(r['ms_per_step'], 2)} {spread(r['iqr_ms'], 2)}"
        added = unless_base(base, f"**{f(r['added_ms'], 2, sign=True)}**")
        cpu = with_added(r["thread_cpu_ms"], r["thread_cpu_added_ms"], 2, base)
        best = with_added(r["best_ms"], r["best_added_ms"], 2, base)
        rows.append([modes.TRACKER_LABELS[v], step, added, cpu, best])
    head = "tracker|ms/step, median of all rounds (IQR)|added ms/step"
    head += "|loop-thread CPU ms/step (added)|best sample ms/step (added)"
    return table(head, rows, "lr")


def p4_section(results):
    if "formats" not in (p4 := results.get("p4", {})):
        return None
    cg = p4.get("callgrind") or {}
    rows = []
    for fmt in (fmt for fmt in FORMAT_LABELS if fmt in p4["formats"]):
        d = p4["formats"][fmt]
        bpe = "—" if d.get("bytes_per_event") is None else f(d["bytes_per_event"], 1)
        if fmt == "summary":
            bpe = f"— ({f(d.get('file_bytes_16_steps'))} bytes for 16 steps, fixed size)"
        objs = f(d.get("json_objects_per_event"), 2) if fmt in ("chrome", "jsonl") else "—"
        ipe = (cg.get(fmt) or {}).get("instructions_per_event")
        rate = f"**{f(d['cpu_events_per_s_median'])}** {spread(d['cpu_events_per_s_iqr'])}"
        times = [rate, f(d["ns_per_event_cpu"]), f(d["wall_events_per_s_median"])]
        rows.append([FORMAT_LABELS[fmt], *times, bpe, objs, f(ipe) if ipe else "—"])
    head = "format|events/s on one core (CPU time; IQR)|ns/event|events/s, wall time|bytes/event|"
    head += "JSON objects/event|instructions/event (callgrind)"
    return table(head, rows, "lr")


def p5_rss(results):
    if "p5" not in results:
        return None
    fq, base, prof = (results["p5"][k] for k in ("fqntrace", "baseline", "profiler"))

    def start(r):  # ops, seconds, RSS at start, growth after warm-up, its slope
        growth = f"{f(r['max_growth_after_warmup_mb'], 1)} MB"
        slope = f"{f(r['slope_mb_per_million_ops'], 2, sign=True)} MB (fit)"
        return [f(r["ops"]), f(r["seconds"], 1), f"{f(r['rss_start_mb'], 1)} MB", growth, slope]

    notes = (
        f"{'flat' if fq['flat'] else 'NOT flat'} (second half "
        f"{f(fq['second_half_growth_mb'], 1, sign=True)} MB); "
        f"{f(fq['growth_from_start_mb'], 1)} MB from the very start"
    )
    profiler = ["torch.profiler (CPU), in memory", f(prof["ops"]), f(prof["seconds"], 1), "—"]
    profiler += [
        f"{f(prof['growth_during_mb'], 1)} MB while recording",
        f"{f(prof['mb_per_million_ops'], 0)} MB while recording; "
        f"{f(prof['mb_per_million_ops_after_exit'], 0)} MB once stopped",
        f"stopping took {f(prof['exit_seconds'], 1)} s; "
        f"RSS +{f(prof['rss_after_exit_growth_mb'], 0)} MB after it",
    ]
    rows = [["fqntrace → Chrome trace on disk", *start(fq), notes]]
    rows += [["baseline (no tracing)", *start(base), "for reference"], profiler]
    head = "run|ops|seconds|RSS at start|growth after warm-up (max)|growth per million ops|notes"
    return table(head, rows, "lrrrrrl")


def p5_problems(results):
    """Only what went wrong, if anything: P5 cut short by its budget, or events dropped."""
    if not (fq := results.get("p5", {}).get("fqntrace")):
        return None
    rows = []
    if fq.get("stopped_by_budget"):
        done = f"{f(fq['ops'])}, {f(fq['ops_planned'])}"
        rows.append(("**stopped at its time budget**: ops done, ops planned", done))
    if fq.get("dropped_events"):
        total = fq["dropped_events"] + (fq["footer_x_events"] or 0)
        share = f(100.0 * fq["dropped_events"] / total, 1)
        rows.append(("**events dropped**", f"{f(fq['dropped_events'])} of {f(total)} ({share} %)"))
    return (
        table("quantity|value", rows, "lr") if rows else "P5 ran all its ops and dropped no event."
    )


def p7_section(results):
    if not (cpu := (results.get("drain") or {}).get("cpu")):
        return None
    cg = ((results.get("callgrind") or {}).get("modes") or {}).get("fqntrace") or {}
    p4 = results.get("p4") or {}
    chrome_ir = ((p4.get("callgrind") or {}).get("chrome") or {}).get("instructions_per_event")
    chrome_ns = ((p4.get("formats") or {}).get("chrome") or {}).get("ns_per_event_cpu")
    loop = f"`torch.add` loop of {f(cpu['ops'])} ops, median of {cpu['runs']} processes"
    drain_ir = (
        "drain-thread instructions per op event (callgrind, the same loop: *other threads* in "
        "P1's instruction table)"
    )
    exporter = "exporter benchmark, Chrome: instructions per event (callgrind), CPU ns per event"
    drain = f"drain CPU per op event: process CPU − loop-thread CPU, {loop} (target ≤ 100 ns)"
    rows = [
        (drain, f"**{f(cpu['drain_ns_per_op'])} ns**"),
        ("… each process", ", ".join(map(f, cpu["drain_ns_per_op_runs"])) + " ns"),
        ("loop-thread CPU per op in the same runs", f"{f(cpu['loop_ns_per_op'])} ns"),
        ("trace bytes per op of that loop", f(cpu["bytes_per_op"], 1)),
        (drain_ir, f(cg.get("other_threads_ir_per_op"))),
        (exporter, f"{f(chrome_ir)}, {f(chrome_ns)}"),
    ]
    return table("quantity|value", rows, "lr")


def p8_section(results):
    if not (d := results.get("ddp")):
        return None

    def iqr(fractions):
        return spread([100 * x for x in fractions], 1, True)

    jobs = ", ".join(f(100 * r["overhead"], 1, sign=True) for r in d["runs"]) + " %"
    overhead = f"**{pct(100 * d['overhead_median'])}** {iqr(d['overhead_iqr'])}"
    groups = f"{pct(100 * d['group_median'])} over {d['groups']} groups {iqr(d['group_iqr'])}"
    row = [f(d["untraced_ms_median"], 2), f(d["traced_ms_median"], 2), overhead, jobs, groups]
    head = "untraced ms/step|traced ms/step|overhead, median over jobs (IQR)|each job"
    head += "|per A B B A group: median (IQR)"
    return table(head, [row], "r")


def p8c_section(results):
    """P8c: P8's model step in one process, instructions per step by mode (callgrind)."""
    steps = (results.get("callgrind") or {}).get("ddp_step") or {}
    if "baseline" not in steps:
        return None
    base = steps["baseline"]["all_threads_ir_per_step"]
    rows = []
    for mode in (m for m in modes.CALLGRIND_DDP_STEP_MODES if m in steps):
        r = steps[mode]
        added = r["all_threads_ir_per_step"] - base
        added = unless_base(mode == "baseline", f"{f(added)} ({pct(100 * added / base)})")
        ir = (r["all_threads_ir_per_step"], r["main_thread_ir_per_step"])
        rows.append([LABELS[mode], *map(f, ir), added])
    head = "mode|instructions per step, all threads|loop thread|added per step, all threads"
    return table(head, rows, "lr")


# P9, the CLI: here and in bench/cli_bench.py's own table.


def cli_doc_section(results):
    """P9: every verb at each size, both formats side by side, against its target."""
    if not (runs := cli_runs(results)):
        return "*Not measured yet: `scripts/bench.sh --cli 1024` and `--cli 300` fill this table.*"
    sizes = sorted(runs, reverse=True)
    big = sizes[0]
    said = "; ".join(
        f"{cli_size(mb)}, {minute(runs[mb]['run']['date'])} UTC, commit "
        f"{runs[mb]['run']['git_commit']}, load average at the end {runs[mb]['run']['loadavg'][1]:.1f}"
        for mb in sizes
    )
    rows = {mb: {(r["verb"], r["format"]): r for r in runs[mb]["rows"]} for mb in sizes}
    lines = []
    for verb in dict.fromkeys(r["verb"] for r in runs[big]["rows"]):

        def cells(mb, show):
            got = [rows[mb].get((verb, fmt)) for fmt in ("Chrome", "JSON Lines")]
            return " · ".join("—" if r is None else show(r) for r in got)

        rates = [cells(mb, lambda r: kilo(r["events_per_cpu_s"])) for mb in sizes]
        cpu = cells(big, lambda r: f"{r['cpu_s']:.1f} ({r['sys_s']:.1f})")
        rss = cells(big, lambda r: f"{r['peak_rss_mib']:.0f}")
        verb_rows = {mb: [r for r in rows[mb].values() if r["verb"] == verb] for mb in sizes}
        missed = [cli_size(mb) for mb in sizes if any(r["met"] is False for r in verb_rows[mb])]
        met = f"**no** at {', '.join(missed)}" if missed else "yes"
        lines.append([f"`{verb}`", *rates, cpu, rss, kilo(verb_rows[big][0]["target"]), met])
    head = ["verb", *(f"{cli_size(mb)}: events / CPU-s, Chrome · JSON Lines" for mb in sizes)]
    head += [f"{cli_size(big)}: CPU s (sys), Chrome · JSON Lines", f"{cli_size(big)}: peak RSS MiB"]
    head += [f"target (events / CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB)", "met"]
    return f"Runs: {said}.\n\n" + table(head, lines, "l" + "r" * (len(sizes) + 3) + "l")


def cli_table(results):
    """bench/cli_bench.py's run as Markdown: one row per verb and format, each against its target."""
    run = results["run"]
    said = (
        f"Package: {results['label']} (commit {run['git_commit']}), {minute(run['date'])} UTC, "
        f"load average at the end {run['loadavg'][1]:.1f} (2 shared cores). Traces: "
        f"{results['chrome_mib']:.0f} MiB Chrome / {results['jsonl_mib']:.0f} MiB JSON Lines "
        f"(`tests/python/bigtrace.py {results['source']} OUT {results['mb']}`, a second rank "
        "with `--rank 1` for `merge` and `diff`, which count both inputs' events; `repair` "
        "counts the events it keeps of the trace cut at 72 %)."
    )
    rows = []
    for r in results["rows"]:
        status = f" ({r['status']})" if r["status"] else ""
        cpu = f"{r['cpu_s']:.1f} ({r['sys_s']:.1f})"
        numbers = [f"{r['events']:,}", cpu, kilo(r["events_per_cpu_s"]), f"{r['peak_rss_mib']:.0f}"]
        against = [kilo(r["target"]), "yes" if r["met"] else "**no**"]
        wall = f"{r['wall_s']:.0f}{status}"
        rows.append([f"`{r['verb']}`", r["format"], *numbers, wall, *against])
    head = "verb|format|events|CPU s (of which sys)|events / CPU-s|peak RSS MiB|wall s"
    head += f"|target (events / CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB)|met"
    return said + "\n\n" + table(head, rows, "llrrrrrrl")


def joined(*sections):
    """One section made of several tables, blank lines between them (tables with no data left out)."""

    def section(results):
        parts = [part for part in (fn(results) for fn in sections) if part]
        return "\n\n".join(parts) or None

    return section


# Section name (as in the document's markers) → its content.
SECTIONS = {
    "costs": costs_table,
    "costs-stale": stale_costs_table,
    "run": run_section,
    "settings": settings_section,
    "p1": p1_section,
    "callgrind": joined(callgrind_ops, callgrind_mlp),
    "p2": joined(p2_ab_section, lambda results: p2_ab_section(results, "compiled_ab")),
    "p3": p3_section,
    "p4": p4_section,
    "p5": joined(p5_rss, p5_problems),
    "p7": p7_section,
    "p8": joined(p8_section, p8c_section),
    "p9-cli": cli_doc_section,
}


# ---------------------------------------------------------------------------------------------
# The terminal


TRACE_FORMATS = ("chrome", "jsonl", "chrome_gz", "jsonl_gz")


def terminal_summary(results):
    """Plain-text summary for the terminal."""
    lines = []
    if "p1" in results:
        s = results["p1"]["summary"]
        head = f"{'P1 mode':<18}{'ns/op':>8}{'added':>8}{'thrCPU':>8}{'MLP us':>9}{'MLP %':>8}"
        lines.append(head)
        for m in results["p1"]["modes"]:
            o, mlp = s["ops"][m], s["mlp"][m]
            lines.append(
                f"{m:<18}{o['ns_per_op']:>8.0f}{o['added_ns']:>+8.0f}{(o.get('thread_cpu_ns') or 0):>8.0f}"
                f"{mlp['us_per_step']:>9.1f}{mlp['slowdown_pct']:>+8.1f}"
            )
    if ab := results.get("p2", {}).get("ab"):
        a = ab["summary"]
        lines.append(
            f"P2 transformer, in-process A/B: untraced {a['baseline_ms']:.1f} ms/step, traced "
            f"{a['fqntrace_ms']:.1f} ms/step, slowdown {a['slowdown_pct']:+.1f} %"
        )
    if "p3" in results:
        v = results["p3"]["summary"]["variants"]
        steps = (f"{k} {v[k]['ms_per_step']:.2f} ms/step" for k in results["p3"]["variants"])
        lines.append("P3 trackers: " + ", ".join(steps))
    if "formats" in results.get("p4", {}):

        def rate(k, d):  # events/s, and bytes/event of the formats that write a trace
            trace = k in TRACE_FORMATS and "bytes_per_event" in d
            size = f" {d['bytes_per_event']:.1f} B/event" if trace else ""
            return f"{k} {d['cpu_events_per_s_median'] / 1e6:.2f} M events/s{size}"

        rates = (rate(k, d) for k, d in results["p4"]["formats"].items())
        lines.append("P4 exporters: " + ", ".join(rates))
    if "p5" in results:
        fq, pr = results["p5"]["fqntrace"], results["p5"]["profiler"]
        lines.append(
            f"P5 fqntrace: {fq['ops']:,} ops, RSS growth after warm-up {fq['max_growth_after_warmup_mb']:.1f} MB "
            f"({'flat' if fq['flat'] else 'not flat'}), {fq['bytes_per_event']:.1f} bytes/event, "
            f"{fq['dropped_events']} dropped; torch.profiler {pr['mb_per_million_ops']:.0f} MB per M ops"
        )
    lines += ["", costs_table(results).replace("**", "")]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default=measured.PATH)
    parser.add_argument("doc", nargs="?", default=DOC)
    args = parser.parse_args()
    results = measured.load(args.results)
    update_file(results, args.doc)
    print(terminal_summary(results))


if __name__ == "__main__":
    main()
