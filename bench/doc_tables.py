"""Fills the generated sections of docs/benchmarks.md from bench/measured.json (the last run of
each part) and bench/measured_by_hand.toml (what was measured by hand), and prints a terminal
summary.

    .venv/bin/python bench/doc_tables.py [bench/measured.json] [docs/benchmarks.md]

docs/benchmarks.md is hand-written, except between marker lines

    <!-- generated:begin NAME -->
    <!-- generated:end NAME -->

whose content is SECTIONS[NAME](results): tables and numbers (the opening table and the rows
below it measured before their code changed: bench/costs.py; the P1-P8 parts' tables:
bench/part_tables.py). The analysis around the tables is prose that this module never touches
(bench/driver.py runs it after every benchmark run, so re-read the prose, and the reasons, when
the numbers change). A section without data says so in one line.
"""

import argparse
import os
import re

import measured
from costs import cli_runs, cli_size, costs_table, f, stale_costs_table, table
from modes import CLI_RSS_LIMIT_MIB
from part_tables import (
    callgrind_mlp,
    callgrind_ops,
    p1_section,
    p2_ab_section,
    p3_section,
    p4_section,
    p5_problems,
    p5_rss,
    p7_section,
    p8_section,
    p8c_section,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOT_MEASURED = "*Not measured in this run.*"


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
            raise ValueError(
                f"docs/benchmarks.md: unknown generated section {name!r} "
                f"(known: {', '.join(SECTIONS)})"
            )
        if name in seen:
            raise ValueError(f"docs/benchmarks.md: the generated section {name!r} twice")
        seen.add(name)
        if only is not None and name not in only:
            return match.group(0)
        content = SECTIONS[name](results) or NOT_MEASURED
        return f"<!-- generated:begin {name} -->\n{content}\n<!-- generated:end {name} -->"

    out = MARKER.sub(fill, doc)
    missing = [name for name in (SECTIONS if only is None else only) if name not in seen]
    if missing:
        raise ValueError(
            f"docs/benchmarks.md lacks the generated sections {', '.join(missing)}; "
            "add their marker lines where the tables belong"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Sections: each returns Markdown, or None when the results have nothing for it (the parts'
# tables, P1-P8: bench/part_tables.py).


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
    head = "part|measures|last run (UTC)|commit|run|load average, start → end".split("|")
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


def met_text(r):
    return "—" if r.get("met") is None else "yes" if r["met"] else "**no**"


def target_text(r):
    return f"{r['target'] / 1e3:,.0f} k" if r.get("target") else "—"


def cli_doc_section(results):
    """P9: every verb at each size, both formats side by side, against its target."""
    runs = cli_runs(results)
    if not runs:
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

        rates = [cells(mb, lambda r: f"{r['events_per_cpu_s'] / 1e3:,.0f} k") for mb in sizes]
        cpu = cells(big, lambda r: f"{r['cpu_s']:.1f} ({r['sys_s']:.1f})")
        rss = cells(big, lambda r: f"{r['peak_rss_mib']:.0f}")
        verb_rows = {mb: [r for r in rows[mb].values() if r["verb"] == verb] for mb in sizes}
        some = next(r for mb in sizes for r in verb_rows[mb])
        missed = [cli_size(mb) for mb in sizes if any(r["met"] is False for r in verb_rows[mb])]
        met = (
            "—"
            if some.get("met") is None
            else f"**no** at {', '.join(missed)}"
            if missed
            else "yes"
        )
        lines.append([f"`{verb}`", *rates, cpu, rss, target_text(some), met])
    head = [
        "verb",
        *(f"{cli_size(mb)}: events / CPU-s, Chrome · JSON Lines" for mb in sizes),
        f"{cli_size(big)}: CPU s (sys), Chrome · JSON Lines",
        f"{cli_size(big)}: peak RSS MiB",
        f"target (events / CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB)",
        "met",
    ]
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
        sys_s = f" ({r['sys_s']:.1f})" if "sys_s" in r else ""
        rows.append(
            [
                f"`{r['verb']}`",
                r["format"],
                f"{r['events']:,}",
                f"{r['cpu_s']:.1f}{sys_s}",
                f"{r['events_per_cpu_s'] / 1e3:,.0f} k",
                f"{r['peak_rss_mib']:.0f}",
                f"{r['wall_s']:.0f}{status}",
                target_text(r),
                met_text(r),
            ]
        )
    head = "verb|format|events|CPU s (of which sys)|events / CPU-s|peak RSS MiB|wall s".split("|")
    head.append(f"target (events / CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB)")
    return said + "\n\n" + table([*head, "met"], rows, "llrrrrrrl")


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
        lines.append(
            f"{'P1 mode':<18}{'ns/op':>8}{'added':>8}{'thrCPU':>8}{'MLP us':>9}{'MLP %':>8}"
        )
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
            size = (
                f" {d['bytes_per_event']:.1f} B/event"
                if k in TRACE_FORMATS and "bytes_per_event" in d
                else ""
            )
            return f"{k} {d['cpu_events_per_s_median'] / 1e6:.2f} M events/s{size}"

        lines.append(
            "P4 exporters: " + ", ".join(rate(k, d) for k, d in results["p4"]["formats"].items())
        )
    if "p5" in results:
        fq, pr = results["p5"]["fqntrace"], results["p5"]["profiler"]
        lines.append(
            f"P5 fqntrace: {fq['ops']:,} ops, RSS growth after warm-up {fq['max_growth_after_warmup_mb']:.1f} MB "
            f"({'flat' if fq['flat'] else 'not flat'}), {fq['bytes_per_event']:.1f} bytes/event, "
            f"{fq['dropped_events']} dropped; torch.profiler {pr['mb_per_million_ops']:.0f} MB per M ops"
        )
    lines.append("")
    lines.append(costs_table(results).replace("**", ""))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description="Fills docs/benchmarks.md's generated sections from the measured results."
    )
    parser.add_argument("results", nargs="?", default=measured.PATH)
    parser.add_argument("doc", nargs="?", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    args = parser.parse_args()
    path, doc = args.results, args.doc
    results = measured.load(path)
    with open(doc) as fh:
        text = update(fh.read(), results)
    with open(doc, "w") as fh:
        fh.write(text)
    print(terminal_summary(results))


if __name__ == "__main__":
    main()
