"""Fills the generated sections of docs/benchmarks.md from bench/results.json, and prints a
terminal summary.

    .venv/bin/python bench/report.py [bench/results.json] [docs/benchmarks.md]

docs/benchmarks.md is hand-written, except between marker lines

    <!-- generated:begin NAME -->
    <!-- generated:end NAME -->

whose content is SECTIONS[NAME](results): tables and numbers only. The analysis around them is prose
that this module never touches (scripts/bench.sh runs it after every benchmark run, so re-read the
prose when the numbers change). A section without data in this run says so in one line.
"""
import json
import os
import re
import sys

from modes import (CALLGRIND_DDP_STEP_MODES, CALLGRIND_MLP_MODES, CALLGRIND_OPS_MODES,
                   CLI_RSS_LIMIT_MIB, LABELS_BY_MODE as LABELS, TRACKER_LABELS)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FORMAT_LABELS = {"chrome": "Chrome trace", "jsonl": "JSON Lines", "summary": "per-module summary",
                 "all": "all three at once"}
NOT_MEASURED = "*Not measured in this run.*"


def f(value, digits=0, sign=False):
    if value is None:
        return "n/a"
    text = f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"
    return text


def yes(flag):
    if flag is None:
        return "n/a (noise: the reference cost came out ≤ 0)"
    return "yes" if flag else "**no**"


def ratio(a, b):
    """a / b, or None when the reference b is missing or came out <= 0 (noise)."""
    return a / b if a is not None and b is not None and b > 0 else None


def kv_table(rows, heading=("quantity", "value")):
    """A two-column Markdown table of (label, text) rows."""
    lines = [f"| {heading[0]} | {heading[1]} |", "|---|---:|"]
    lines += [f"| {label} | {text} |" for label, text in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Filling the document


MARKER = re.compile(r"^<!-- generated:begin (?P<name>[a-z0-9-]+) -->\n(?P<body>.*?)"
                    r"^<!-- generated:end (?P=name) -->$", re.M | re.S)


def update(doc, results, only=None):
    """`doc` with every generated section's content replaced from `results` (only: just the
    sections named there); the rest as it is. Raises ValueError for a section name this module
    does not know, or one it knows that the document lacks (so a renamed section never goes
    stale unnoticed)."""
    seen = set()

    def fill(match):
        name = match.group("name")
        if name not in SECTIONS:
            raise ValueError(f"docs/benchmarks.md: unknown generated section {name!r} "
                             f"(known: {', '.join(SECTIONS)})")
        seen.add(name)
        if only is not None and name not in only:
            return match.group(0)
        content = SECTIONS[name](results) or NOT_MEASURED
        return f"<!-- generated:begin {name} -->\n{content}\n<!-- generated:end {name} -->"

    out = MARKER.sub(fill, doc)
    missing = [name for name in (SECTIONS if only is None else only) if name not in seen]
    if missing:
        raise ValueError(f"docs/benchmarks.md lacks the generated sections {', '.join(missing)}; "
                         "add their marker lines where the tables belong")
    return out


# ---------------------------------------------------------------------------------------------
# Sections: each returns Markdown, or None when the results have nothing for it.


def run_section(results):
    m = results["machine"]
    kind = ("quick smoke run (`scripts/bench.sh --quick`: few rounds, numbers are rough)"
            if results["kind"] == "quick" else "full run (`scripts/bench.sh`)")
    return "\n".join([
        f"- Run: {kind}; raw numbers in `bench/results.json`.",
        f"- Date: {results['date']} · torch {results['torch']} · commit {results.get('git_commit')}",
        f"- Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('mem_total_gb')} GB, "
        f"Linux {m.get('kernel')}, Python {m.get('python')}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in m['loadavg_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))} (the machine is shared and noisy)",
        f"- Whole run: {f(results.get('seconds'), 0)} s, {results.get('processes')} measurement "
        "processes.",
    ] + [f"- Partial run ({', '.join(p['only'])}): {p['date']} · commit {p['git_commit']}"
         + (f"; load average {p['loadavg'][0][0]:.2f} at start, {p['loadavg'][1][0]:.2f} at end"
            if p.get("loadavg") else "")
         + f"; the other parts are from the run above. {p.get('note', '')}".rstrip()
         for p in results.get("partial", [])])


def p1_settings(results):
    p1 = results.get("p1")
    if not p1:
        return None
    return kv_table([("`torch.add` calls per sample", f(p1["ops_per_sample"])),
                     ("samples per process (after one warm-up sample)", f(p1["samples_per_process"])),
                     ("rounds", f(p1["rounds"])),
                     ("MLP steps per sample", f(p1["mlp_steps_per_sample"]))], ("setting", "value"))


def p1_section(results):
    return p1_table(results) if "p1" in results else None


def p1_ratios(results):
    if "p1" not in results:
        return None
    r = results["p1"]["summary"]["ratios"]
    rows = [
        ("fqntrace added ns/op ÷ empty observer's", r["fqntrace_over_empty_added_ns"]),
        ("fqntrace added ns/op ÷ torch.profiler's", r["fqntrace_over_profiler_added_ns"]),
        ("fqntrace (FQNTRACE_FLOPS=1) added ns/op ÷ empty observer's",
         r["fqntrace_flops_over_empty_added_ns"]),
        ("fqntrace MLP slowdown ÷ empty observer's", r["mlp_fqntrace_over_empty_slowdown"]),
        ("fqntrace without module hooks: MLP slowdown ÷ empty observer's",
         r.get("mlp_fqntrace_nohooks_over_empty_slowdown")),
        ("*best samples:* fqntrace added ns/op ÷ empty observer's",
         r.get("best_fqntrace_over_empty_added_ns")),
        ("*best samples:* fqntrace added ns/op ÷ torch.profiler's",
         r.get("best_fqntrace_over_profiler_added_ns")),
        ("*loop-thread CPU:* fqntrace added ns/op ÷ empty observer's",
         r.get("thread_cpu_fqntrace_over_empty_added_ns")),
        ("*best samples:* fqntrace MLP slowdown ÷ empty observer's",
         r.get("best_mlp_fqntrace_over_empty_slowdown")),
    ]
    return kv_table([(label, f"{f(value, 2)}×") for label, value in rows], ("ratio", "value"))


def p1_views(results):
    """fqntrace's per-op overhead against each reference, seen three ways (wall-time medians,
    best samples, loop-thread CPU) and in instructions; the target in ns; the spread."""
    if "p1" not in results:
        return None
    s = results["p1"]["summary"]
    o, r = s["ops"], s["ratios"]
    fq = o["fqntrace"]
    rows = []
    for ref, name in (("empty", "empty observer"), ("profiler", "torch.profiler")):
        rows += [
            (f"vs {name}: added ns/op, wall-time medians",
             f"+{f(fq['added_ns'])} vs +{f(o[ref]['added_ns'])} "
             f"({f(ratio(fq['added_ns'], o[ref]['added_ns']), 2)}×)"),
            (f"vs {name}: added ns/op, best samples",
             f"+{f(fq['best_added_ns'])} vs +{f(o[ref]['best_added_ns'])} "
             f"({f(r.get('best_fqntrace_over_' + ref + '_added_ns'), 2)}×)"),
            (f"vs {name}: added ns/op, loop-thread CPU",
             f"+{f(fq['thread_cpu_added_ns'])} vs +{f(o[ref]['thread_cpu_added_ns'])} "
             f"({f(ratio(fq['thread_cpu_added_ns'], o[ref]['thread_cpu_added_ns']), 2)}×)"),
        ]
    cg = results.get("callgrind", {}).get("modes", {})
    if all(k in cg for k in ("baseline", "empty", "fqntrace")):
        b = cg["baseline"]["main_thread_ir_per_op"]
        rows.append(("vs empty observer: added instructions per op (callgrind)",
                     f"{f(ratio(cg['fqntrace']['main_thread_ir_per_op'] - b, cg['empty']['main_thread_ir_per_op'] - b), 2)}×"))
    limit = 1.5 * o["empty"]["added_ns"]
    rows.append(("per-op target: 1.5× the empty observer's added ns/op",
                 f"≤ {f(limit)} (fqntrace {f(fq['added_ns'])}: {f(fq['added_ns'] - limit, sign=True)})"))
    width = {m: o[m]["iqr_ns"][1] - o[m]["iqr_ns"][0] for m in ("fqntrace", "profiler", "empty")}
    rows.append(("wall-time IQR width over rounds, ns/op: fqntrace, torch.profiler, empty observer",
                 f"{f(width['fqntrace'])}, {f(width['profiler'])}, {f(width['empty'])}"))
    return kv_table(rows)


def mlp_split(results):
    """The MLP step's slowdown, split into the ops' share and the module hooks' share."""
    if "p1" not in results:
        return None
    m = results["p1"]["summary"]["mlp"]
    rows = [("MLP slowdown: empty observer, fqntrace",
             f"{f(m['empty']['slowdown_pct'], 1)} %, {f(m['fqntrace']['slowdown_pct'], 1)} %")]
    nohooks = m.get("fqntrace_nohooks")
    if nohooks is not None:
        rows += [("MLP slowdown of fqntrace without its module scopes (the ops' share)",
                  f"{f(nohooks['slowdown_pct'], 1)} %"),
                 ("the module hooks' share (with hooks minus without)",
                  f"{f(m['fqntrace']['slowdown_pct'] - nohooks['slowdown_pct'], 1, sign=True)} points")]
    cgm = results.get("callgrind", {}).get("mlp")
    if cgm and all(k in cgm for k in ("baseline", "empty", "fqntrace", "fqntrace_nohooks")):
        b = cgm["baseline"]["main_thread_ir_per_step"]
        grow = {k: 100.0 * (cgm[k]["main_thread_ir_per_step"] / b - 1.0)
                for k in ("empty", "fqntrace_nohooks", "fqntrace")}
        rows += [("instructions per step (callgrind) grow by: empty observer, fqntrace without hooks, "
                  "fqntrace", ", ".join(f"{f(grow[k], 1)} %" for k in grow)),
                 ("the same ÷ the empty observer's: fqntrace, fqntrace without hooks",
                  f"{f(grow['fqntrace'] / grow['empty'], 2)}×, "
                  f"{f(grow['fqntrace_nohooks'] / grow['empty'], 2)}×")]
    return kv_table(rows)


def p6_section(results):
    if "p1" not in results:
        return None
    p6 = results["p1"]["summary"]["p6"]
    rows = [("session running (`_C.running()`)", str(p6["running"])),
            ("RecordFunction callback installed (`at::hasGlobalCallbacks()`)",
             str(p6["global_callbacks"])),
            ("added ns/op vs baseline, wall-time medians", f(p6["added_ns"], sign=True)),
            ("noise: the larger of 1 % and the baseline's IQR over rounds, ns/op",
             f"±{f(p6['noise_ns'])}"),
            ("within the noise", "yes" if p6["within_noise"] else "**no**"),
            ("added ns/op, best samples", f(p6.get("best_added_ns"), sign=True))]
    cg = results.get("callgrind", {}).get("modes", {})
    if "loaded_off" in cg and "baseline" in cg:
        b = cg["baseline"]["main_thread_ir_per_op"]
        d = cg["loaded_off"]["main_thread_ir_per_op"] - b
        rows.append(("added instructions per op (callgrind)",
                     f"{f(d, sign=True)} ({f(100 * d / b, 2, sign=True)} %)"))
    return kv_table(rows)


def p2_settings(results):
    p2 = results.get("p2")
    if not p2:
        return None
    rows = [("model", f"`{p2['model']}`"), ("batch", f(p2["batch"])), ("optimizer", p2["optimizer"]),
            ("`torch.set_num_threads`", f(p2["threads"])), ("warm-up steps", f(p2["warmup_steps"])),
            ("timed steps per process", f(p2["steps_per_process"])), ("rounds", f(p2["rounds"]))]
    ab = p2.get("ab")
    if ab:
        rows += [("in-process A/B: processes", f(ab["processes"])),
                 ("in-process A/B: blocks per process", f(len(ab["per_process"][0]["blocks"]))),
                 ("in-process A/B: timed steps per block", f(ab["steps_per_block"]))]
    return kv_table(rows, ("setting", "value"))


def p2_section(results):
    if "p2" not in results:
        return None
    s = results["p2"]["summary"]
    bi, fi, pi = s["baseline_iqr_ms"], s["fqntrace_iqr_ms"], s["paired_slowdown_pct_iqr"]
    return "\n".join([
        "| mode | ms/step, median over rounds (IQR) | slowdown | paired per round: median (IQR) | best step |",
        "|---|---:|---:|---:|---:|",
        f"| baseline | {f(s['baseline_ms'], 1)} ({f(bi[0], 1)} … {f(bi[1], 1)}) | — | — | — |",
        f"| fqntrace | {f(s['fqntrace_ms'], 1)} ({f(fi[0], 1)} … {f(fi[1], 1)}) | "
        f"**{f(s['slowdown_pct'], 1, sign=True)} %** | {f(s['paired_slowdown_pct_median'], 1, sign=True)} % "
        f"({f(pi[0], 1, sign=True)} … {f(pi[1], 1, sign=True)}) | {f(s['best_slowdown_pct'], 1, sign=True)} % |",
    ])


def p2_ab_section(results, key="ab"):
    ab = results.get("p2", {}).get(key)
    if not ab:
        return None
    a = ab["summary"]
    iqr = a["group_slowdown_pct_iqr"]
    return "\n".join([
        "| arm | ms/step (median of all steps) | slowdown | per process | per A B B A group: median (IQR) | best step vs best step |",
        "|---|---:|---:|---:|---:|---:|",
        f"| untraced | {f(a['baseline_ms'], 1)} | — | — | — | — |",
        f"| traced (fqntrace.profile) | {f(a['fqntrace_ms'], 1)} | **{f(a['slowdown_pct'], 1, sign=True)} %** | "
        + ", ".join(f"{f(x, 1, sign=True)} %" for x in a["per_process_slowdown_pct"])
        + f" | {f(a.get('group_slowdown_pct_median'), 1, sign=True)} % ({f(iqr[0], 1, sign=True)} … "
        f"{f(iqr[1], 1, sign=True)} %, {a.get('groups')} groups) | {f(a['best_slowdown_pct'], 1, sign=True)} % |",
    ])


def p2_budget(results):
    """What a step's traced ranges should cost at P1's per-op prices, beside the A/B result."""
    ab = results.get("p2", {}).get("ab")
    if not ab:
        return None
    a = ab["summary"]
    rows = [("traced ranges per step", f"~{f(a['events_per_step'])}"),
            ("traced step, ms", f"~{f(a['fqntrace_ms'], 0)}")]
    if "p1" in results:
        o = results["p1"]["summary"]["ops"]["fqntrace"]
        drain_ns = o["process_cpu_ns"] - o["thread_cpu_ns"]
        loop_ms = a["events_per_step"] * o["thread_cpu_added_ns"] / 1e6
        drain_ms = a["events_per_step"] * drain_ns / 1e6
        rows += [("P1's loop-thread CPU added per event, ns", f"+{f(o['thread_cpu_added_ns'])}"),
                 ("P1's drain-thread CPU per event, ns", f(drain_ns)),
                 ("so per step on the training thread",
                  f"~{f(loop_ms, 1)} ms ({f(100 * loop_ms / a['baseline_ms'], 1)} %)"),
                 ("so per step on the drain thread", f"~{f(drain_ms, 1)} ms")]
    return kv_table(rows)


def p3_settings(results):
    p3 = results.get("p3")
    if not p3:
        return None
    return kv_table([("model", p3["model"]), ("`torch.set_num_threads`", f(p3["threads"])),
                     ("processes", f(p3["processes"])), ("rounds per process", f(p3["rounds"])),
                     ("timed steps of every variant per round", f(p3["steps_per_sample"]))],
                    ("setting", "value"))


def p3_section(results):
    return p3_table(results) if "p3" in results else None


def p3_per_module(results):
    if "p3" not in results:
        return None
    v, n = results["p3"]["summary"]["variants"], results["p3"]["modules"]
    return kv_table([(f"added µs per module per step, {who}",
                      f"~{f(1000 * v[variant]['added_ms'] / n, 0)}")
                     for who, variant in (("fqntrace.ModTracker", "fqntrace_modtracker"),
                                          ("torch's ModTracker", "torch_modtracker"))])


def p4_settings(results):
    p4 = results.get("p4", {})
    if "formats" not in p4:
        return None
    ctx = p4.get("context", {})
    return kv_table([
        ("raw events per training step", f(p4["formats"].get("chrome", {}).get("events_per_step"))),
        ("repetitions (interleaved at random)", f(p4["repetitions"])),
        ("minimum time per repetition", f"≥ {p4['min_time_s']} s"),
        ("CPUs and MHz, as Google Benchmark reports them",
         f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz"),
        ("build of the Debian Google Benchmark library", ctx.get("library_build_type", "?")),
    ], ("setting", "value"))


def p4_section(results):
    return p4_table(results) if "formats" in results.get("p4", {}) else None


def p4_throughput(results):
    p4 = results.get("p4", {})
    if "formats" not in p4:
        return None
    formats, cg = p4["formats"], p4.get("callgrind") or {}
    rows = [("slowest format, events/s on one core", f(p4["targets"]["events_per_s"]["value"])),
            ("all three formats at once (FQNTRACE_FORMATS=jsonl,summary beside the Chrome file), "
             "events/s", f(formats.get("all", {}).get("cpu_events_per_s_median")))]
    if cg.get("chrome"):
        rows.append(("instructions per event in the drain: Chrome, per-module summary",
                     f"{f(cg['chrome']['instructions_per_event'])}, "
                     f"{f((cg.get('summary') or {}).get('instructions_per_event'))}"))
    return kv_table(rows)


def p4_bytes(results):
    p4 = results.get("p4", {})
    b = p4.get("chrome_bytes")
    if not b:
        return None
    return kv_table([
        ("bytes per raw event (target ≤ 200)", f(p4["targets"]["chrome_bytes_per_event"]["value"], 1)),
        ("bytes per `X` object", f(b["bytes_per_x_event"], 1)),
        ("… of string values (name, fqn, module type, cat, phase)", f(b["strings_per_x_event"], 1)),
        ("… of numbers (pid, tid, ts, dur, sequence number, FLOPs, depth)",
         f(b["numbers_per_x_event"], 1)),
        ("… of keys, quotes and punctuation", f(b["syntax_per_x_event"], 1)),
        ("bytes per fwdbwd flow object (two per node)", f(b["bytes_per_flow_object"], 1)),
        ("flow bytes per raw event, on average", f(b["flow_bytes_per_x_event"], 1)),
    ])


def p5_rss(results):
    return p5_table(results)[0] if "p5" in results else None


def p5_trace(results):
    return p5_table(results)[1] if "p5" in results else None


def p5_problems(results):
    """Only what went wrong, if anything: P5 cut short by its budget, or events dropped."""
    if "p5" not in results:
        return None
    fq = results["p5"]["fqntrace"]
    rows = []
    if fq.get("stopped_by_budget"):
        rows.append(("**stopped at its time budget**: ops done, ops planned",
                     f"{f(fq['ops'])}, {f(results['settings']['p5_ops'])}"))
    if fq.get("dropped_events"):
        total = fq["dropped_events"] + (fq["footer_x_events"] or 0)
        rows.append(("**events dropped**",
                     f"{f(fq['dropped_events'])} of {f(total)} "
                     f"({f(100.0 * fq['dropped_events'] / total, 1)} %)"))
    return kv_table(rows) if rows else "None: P5 ran all its ops and dropped no event."


def callgrind_settings(results):
    cg = results.get("callgrind")
    if not cg or "modes" not in cg:
        return None
    return kv_table([("`torch.add` calls per mode", f(cg["ops"])),
                     ("MLP steps per mode (P1's MLP)", f(cg.get("mlp_steps")))], ("setting", "value"))


def callgrind_ops(results):
    cg = results.get("callgrind")
    if not cg or "modes" not in cg:
        return None
    modes = cg["modes"]
    base = modes["baseline"]["main_thread_ir_per_op"]
    rows = ["| mode | loop thread instructions/op | added vs baseline | other threads (drain) instructions/op | "
            "fqntrace on_start + on_end (inclusive) |", "|---|---:|---:|---:|---:|"]
    for m in CALLGRIND_OPS_MODES:
        if m not in modes:
            continue
        r = modes[m]
        callbacks = (f"{f(r['on_start_ir_per_op'])} + {f(r['on_end_ir_per_op'])}"
                     if "on_start_ir_per_op" in r else "—")
        added = "—" if m == "baseline" else f(r["main_thread_ir_per_op"] - base, sign=True)
        rows.append(f"| {LABELS[m]} | {f(r['main_thread_ir_per_op'])} | {added} | "
                    f"{f(r['other_threads_ir_per_op'])} | {callbacks} |")
    return "\n".join(rows)


def callgrind_mlp(results):
    mlp = (results.get("callgrind") or {}).get("mlp")
    if not mlp or "baseline" not in mlp:
        return None
    base = mlp["baseline"]["main_thread_ir_per_step"]
    rows = ["| mode | instructions/step | added vs baseline | % of baseline | other threads/step |",
            "|---|---:|---:|---:|---:|"]
    for m in CALLGRIND_MLP_MODES:
        if m not in mlp:
            continue
        r = mlp[m]
        v = r["main_thread_ir_per_step"]
        added = ("— | —" if m == "baseline" else
                 f"{f(v - base, sign=True)} | {f(100.0 * (v / base - 1.0), 1, sign=True)} %")
        rows.append(f"| {LABELS[m]} | {f(v)} | {added} | {f(r['other_threads_ir_per_step'])} |")
    return "\n".join(rows)


def hot_path(results):
    cg = results.get("callgrind", {}).get("modes")
    if not cg:
        return None
    b = cg["baseline"]["main_thread_ir_per_op"]
    empty = cg["empty"]["main_thread_ir_per_op"] - b
    traced = cg["fqntrace"]["main_thread_ir_per_op"] - b
    flops = cg["fqntrace_flops"]["main_thread_ir_per_op"] - b
    return kv_table([("fqntrace's added instructions per op ÷ the empty observer's",
                      f"{f(traced / empty, 2)}×"),
                     ("more instructions per op with FQNTRACE_FLOPS=1 (inputs boxed)",
                      f"~{f(flops - traced)}")])



def p7_section(results):
    d = results.get("drain") or {}
    cpu = d.get("cpu")
    if not cpu:
        return None
    cg = ((results.get("callgrind") or {}).get("modes") or {}).get("fqntrace") or {}
    p4 = results.get("p4") or {}
    chrome = (p4.get("formats") or {}).get("chrome") or {}
    chrome_cg = (p4.get("callgrind") or {}).get("chrome") or {}
    return kv_table([
        (f"drain CPU per op event: process CPU − loop-thread CPU, `torch.add` loop of "
         f"{f(cpu['ops'])} ops, median of {cpu['runs']} processes (target ≤ 100 ns)",
         f"**{f(cpu['drain_ns_per_op'])} ns**"),
        ("… each process", ", ".join(f(v) for v in cpu["drain_ns_per_op_runs"]) + " ns"),
        ("loop-thread CPU per op in the same runs", f"{f(cpu['loop_ns_per_op'])} ns"),
        ("trace bytes per op of that loop", f(cpu["bytes_per_op"], 1)),
        ("drain-thread instructions per op event (callgrind, the same loop: *other threads* below)",
         f(cg.get("other_threads_ir_per_op"))),
        ("exporter benchmark, Chrome: instructions per event (callgrind), CPU ns per event",
         f"{f(chrome_cg.get('instructions_per_event'))}, {f(chrome.get('ns_per_event_cpu'))}"),
    ])


def p7_nice_section(results):
    rows = (results.get("drain") or {}).get("nice")
    if not rows:
        return None
    lines = ["| drain thread nice (process 0) | events dropped | of | loop ops/s under the load |",
             "|---:|---:|---:|---:|"]
    for r in rows:
        total = r["events"] + r["dropped"]
        lines.append(f"| +{r['nice']} | {f(r['dropped'])} ({f(100.0 * r['dropped'] / total, 1)} %) | "
                     f"{f(total)} | {f(r['ops_per_s'])} |")
    return "\n".join(lines)


def p4b_section(results):
    demo = (results.get("drain") or {}).get("demo")
    if not demo:
        return None
    return kv_table([
        ("Chrome bytes per op event on the demo (file bytes ÷ `cpu_op` events; target ≤ 150)",
         f"**{f(demo['bytes_per_op_event'], 1)}**"),
        ("file bytes, `cpu_op` events, JSON objects",
         f"{f(demo['bytes'])}, {f(demo['cpu_op_events'])}, {f(demo['objects'])}"),
    ])


def p8_section(results):
    d = results.get("ddp")
    if not d:
        return None
    lines = ["| job | untraced ms/step | traced ms/step | overhead (all steps) | "
             "per A B B A group: median (min … max) |", "|---|---:|---:|---:|---:|"]
    for i, r in enumerate(d["runs"]):
        g = r["group_overheads"]
        lines.append(f"| {i} | {f(r['untraced_ms'], 2)} | {f(r['traced_ms'], 2)} | "
                     f"{f(100 * r['overhead'], 1, sign=True)} % | {f(100 * r['group_median'], 1, sign=True)} % "
                     f"({f(100 * min(g), 1, sign=True)} … {f(100 * max(g), 1, sign=True)} %) |")
    lo, hi = d["overhead_iqr"]
    glo, ghi = d["group_iqr"]
    lines.append(f"| **median over jobs** | {f(d['untraced_ms_median'], 2)} | {f(d['traced_ms_median'], 2)} | "
                 f"**{f(100 * d['overhead_median'], 1, sign=True)} %** (IQR {f(100 * lo, 1, sign=True)} … "
                 f"{f(100 * hi, 1, sign=True)}) | {f(100 * d['group_median'], 1, sign=True)} % over "
                 f"{d['groups']} groups (IQR {f(100 * glo, 1, sign=True)} … {f(100 * ghi, 1, sign=True)}) |")
    return "\n".join(lines)


def p8c_section(results):
    """P8c: P8's model step in one process, instructions per step by mode (callgrind)."""
    steps = (results.get("callgrind") or {}).get("ddp_step") or {}
    if "baseline" not in steps:
        return None
    base = steps["baseline"]["all_threads_ir_per_step"]
    lines = ["| mode | instructions per step, all threads | loop thread | added per step, all threads |",
             "|---|---:|---:|---:|"]
    for mode in CALLGRIND_DDP_STEP_MODES:
        r = steps.get(mode)
        if r is None:
            continue
        added = r["all_threads_ir_per_step"] - base
        lines.append(f"| {LABELS[mode]} | {f(r['all_threads_ir_per_step'])} | "
                     f"{f(r['main_thread_ir_per_step'])} | "
                     + ("—" if mode == "baseline" else f"{f(added)} ({f(100 * added / base, 1, sign=True)} %)")
                     + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Tables that are whole sections


def p1_table(results):
    p1 = results["p1"]
    s = p1["summary"]
    rows = ["| mode | ns/op (IQR over rounds) | added ns/op | loop-thread CPU ns/op (added) | "
            "process CPU ns/op | best sample ns/op (added) | MLP µs/step (IQR) | MLP slowdown | "
            "MLP slowdown, best samples |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in p1["modes"]:
        o, mlp = s["ops"][m], s["mlp"][m]
        iqr, miqr = o["iqr_ns"], mlp["iqr_us"]
        base = m == "baseline"
        rows.append(
            f"| {LABELS[m]} | {f(o['ns_per_op'])} ({f(iqr[0])} … {f(iqr[1])}) | "
            + ("—" if base else f"**{f(o['added_ns'], sign=True)}**")
            + f" | {f(o['thread_cpu_ns'])}" + ("" if base else f" ({f(o['thread_cpu_added_ns'], sign=True)})")
            + f" | {f(o['process_cpu_ns'])} | {f(o['best_ns'])}"
            + ("" if base else f" ({f(o['best_added_ns'], sign=True)})")
            + f" | {f(mlp['us_per_step'], 1)} ({f(miqr[0], 1)} … {f(miqr[1], 1)}) | "
            + ("—" if base else f"**{f(mlp['slowdown_pct'], 1, sign=True)} %**")
            + " | " + ("—" if base else f"{f(mlp['best_slowdown_pct'], 1, sign=True)} %") + " |")
    return "\n".join(rows)


def callgrind_targets(results):
    """Issue 17's instruction-count targets: loop-thread instructions fqntrace adds ÷ the empty
    observer's, per tiny op (P1) and per MLP step (P1m)."""
    cg = results.get("callgrind") or {}
    rows = []
    for row, part, unit, limit in (("P1", "modes", "op", 1.25), ("P1m", "mlp", "step", 1.5)):
        modes = cg.get(part) or {}
        if not all(m in modes for m in ("baseline", "empty", "fqntrace")):
            continue
        key = f"main_thread_ir_per_{unit}"
        base = modes["baseline"][key]
        ratio = (modes["fqntrace"][key] - base) / (modes["empty"][key] - base)
        rows.append(f"| {row} loop-thread instructions added per {'tiny op' if unit == 'op' else 'MLP step'} "
                    f"÷ empty observer's (callgrind) | {f(ratio, 2)}× | ≤ {limit}× | {yes(ratio <= limit)} |")
    # Issue 26: the whole cost of tracing, every thread (fqntrace's drain included), against
    # torch.profiler's (which formats nothing while it records: its cost comes at stop).
    modes = cg.get("modes") or {}
    if all(m in modes for m in ("baseline", "fqntrace", "profiler")):
        base = modes["baseline"]["main_thread_ir_per_op"]
        ours = modes["fqntrace"]["main_thread_ir_per_op"] - base + modes["fqntrace"]["other_threads_ir_per_op"]
        theirs = (modes["profiler"]["main_thread_ir_per_op"] - base
                  + modes["profiler"]["other_threads_ir_per_op"])
        ratio = ours / theirs
        rows.append(f"| P1 instructions added per tiny op, all threads ({f(ours)}), ÷ torch.profiler's "
                    f"({f(theirs)}) (callgrind) | {f(ratio, 2)}× | ≤ 0.6× | {yes(ratio <= 0.6)} |")
    # The same, over the whole run until the trace file is written (torch.profiler's stop and
    # export_chrome_trace, fqntrace's drain and stop): per op, the slope between two op counts.
    whole = cg.get("whole") or {}
    if all(m in whole for m in ("baseline", "fqntrace", "profiler")):
        base = whole["baseline"]["ir_per_op"]
        ours, theirs = whole["fqntrace"]["ir_per_op"] - base, whole["profiler"]["ir_per_op"] - base
        ratio = ours / theirs
        rows.append(f"| P1 whole run until the trace file is written: instructions added per tiny op, all "
                    f"threads ({f(ours)}), ÷ torch.profiler's ({f(theirs)}) (callgrind) | {f(ratio, 2)}× "
                    f"| ≤ 0.6× | {yes(ratio <= 0.6)} |")
    return rows


def targets_table(results):
    rows = ["| target | measured | target | met |", "|---|---:|---:|---|"]
    if "p1" in results:
        t = results["p1"]["summary"]["targets"]
        rows.append(f"| P1 fqntrace added ns/op ÷ empty observer's | {f(t['ops_vs_empty']['value'], 2)}× | ≤ 1.5× | {yes(t['ops_vs_empty']['met'])} |")
        rows.append(f"| P1 fqntrace added ns/op ÷ torch.profiler's | {f(t['ops_vs_profiler']['value'], 2)}× | ≤ 0.5× | {yes(t['ops_vs_profiler']['met'])} |")
        rows.append(f"| P1 MLP slowdown ÷ empty observer's | {f(t['mlp_vs_empty']['value'], 2)}× | ≤ 1.5× | {yes(t['mlp_vs_empty']['met'])} |")
    rows += callgrind_targets(results)
    if "p2" in results:
        p2 = results["p2"]["summary"]
        ab = results["p2"].get("ab")
        if ab:
            a = ab["summary"]
            rows.append(f"| P2 transformer step slowdown (in-process A/B) | {f(a['slowdown_pct'], 1, sign=True)} % | ≤ 3 % | {yes(a['met'])} |")
            rows.append(f"| P2 transformer step slowdown (separate processes) | {f(p2['slowdown_pct'], 1, sign=True)} % | ≤ 3 % | {yes(p2['met'])} |")
        else:
            rows.append(f"| P2 transformer step slowdown | {f(p2['slowdown_pct'], 1, sign=True)} % | ≤ 3 % | {yes(p2['met'])} |")
    if "p3" in results:
        p3 = results["p3"]["summary"]
        v = p3["variants"]
        rows.append(f"| P3 fqntrace.ModTracker added time ÷ torch ModTracker's ({f(v['fqntrace_modtracker']['added_ms'], 2, sign=True)} "
                    f"vs {f(v['torch_modtracker']['added_ms'], 2, sign=True)} ms/step) | {f(p3['target']['value'], 2)}× | ≤ 0.5× | "
                    f"{yes(p3['target']['met'])} |")
    if "p4" in results and "targets" in results["p4"]:
        t = results["p4"]["targets"]
        fm = results["p4"]["formats"]
        each = ", ".join(f"{k} {f(fm[k]['cpu_events_per_s_median'] / 1e6, 2)} M" for k in ("chrome", "jsonl", "summary")
                         if k in fm)
        rows.append(f"| P4 exporter throughput on one core, slowest format ({each}) | "
                    f"{f((t['events_per_s']['value'] or 0) / 1e6, 2)} M events/s | ≥ 2 M events/s | "
                    f"{yes(t['events_per_s']['met'])} |")
        rows.append(f"| P4 Chrome trace bytes per event (no shapes) | {f(t['chrome_bytes_per_event']['value'], 1)} | ≤ 200 | "
                    f"{yes(t['chrome_bytes_per_event']['met'])} |")
        if "gzip_drain_cost_ratio" in t:
            gz = t["gzip_drain_cost_ratio"]
            rows.append(f"| P4 gzip drain cost per event ÷ plain Chrome ({f(t['gzip_bytes_per_event']['value'], 1)} B/event "
                        f"gzip on the mix) | {f(gz['value'], 2)}× | ≤ 1.5× | {yes(gz['met'])} |")
    drain = results.get("drain") or {}
    if drain.get("targets"):
        t = drain["targets"]
        rows.append(f"| P7 drain CPU per op event (process CPU − loop-thread CPU, tiny-op loop) | "
                    f"{f(t['drain_ns']['value'])} ns | ≤ 100 ns | {yes(t['drain_ns']['met'])} |")
        if t.get("gzip_ratio", {}).get("value") is not None:
            g = t["gzip_ratio"]
            rows.append(f"| P7 gzip drain CPU per op event ÷ plain (`.json.gz`: {f(g['gzip_ns'])} ns, "
                        f"{f(g['gzip_bytes_per_op'], 1)} B/op) | {f(g['value'], 2)}× | ≤ 1.5× | {yes(g['met'])} |")
        if t.get("gzip_train_ratio", {}).get("value") is not None:
            g = t["gzip_train_ratio"]
            rows.append(f"| P7 gzip drain CPU per event ÷ plain on a training loop (`--workload train`: "
                        f"{f(g['gzip_ns'])} vs {f(g['plain_ns'])} ns) | {f(g['value'], 2)}× | ≤ 1.5× | "
                        f"{yes(g['met'])} |")
        rows.append(f"| P4b Chrome bytes per op event on the demo | {f(t['demo_bytes']['value'], 1)} | ≤ 150 | "
                    f"{yes(t['demo_bytes']['met'])} |")
    if results.get("ddp"):
        t = results["ddp"]["target"]
        rows.append(f"| P8 DDP 2 ranks on 2 cores, in-process A/B step overhead (median over jobs) | "
                    f"{f(100 * t['value'], 1, sign=True)} % | ≤ 3 % | {yes(t['met'])} |")
    steps = (results.get("callgrind") or {}).get("ddp_step") or {}
    if all(m in steps for m in ("baseline", "empty", "fqntrace_rank")):
        base = steps["baseline"]["all_threads_ir_per_step"]
        ours = steps["fqntrace_rank"]["all_threads_ir_per_step"] / base - 1
        floor = steps["empty"]["all_threads_ir_per_step"] / base - 1
        rows.append(f"| P8c P8's model step, instructions added per step on all threads as a rank traces it "
                    f"(callgrind; the empty observer alone: {f(100 * floor, 1, sign=True)} %) | "
                    f"{f(100 * ours, 1, sign=True)} % | ≤ 3 % | {yes(ours <= 0.03)} |")
    if "p5" in results:
        p5 = results["p5"]["fqntrace"]
        rows.append(f"| P5 RSS growth after warm-up while tracing | {f(p5['max_growth_after_warmup_mb'], 1)} MB, "
                    f"{'flat' if p5['flat'] else 'not flat'} | ≤ 32 MB, flat | {yes(p5['met'])} |")
    if "p1" in results:
        p6 = results["p1"]["summary"]["p6"]
        rows.append(f"| P6 FQNTRACE unset: no callback, per-op within noise | running={p6['running']}, "
                    f"callbacks={p6['global_callbacks']}, {f(p6['added_ns'], sign=True)} ns/op "
                    f"(noise ±{f(p6['noise_ns'])}) | no callback, within noise | "
                    f"{yes(not p6['running'] and not p6['global_callbacks'] and p6['within_noise'])} |")
    return "\n".join(rows)


def p3_table(results):
    p3 = results["p3"]
    s = p3["summary"]
    rows = ["| tracker | ms/step, median of all rounds (IQR) | added ms/step | loop-thread CPU ms/step (added) | "
            "best sample ms/step (added) |", "|---|---:|---:|---:|---:|"]
    for v in p3["variants"]:
        r = s["variants"][v]
        base = v == "none"
        rows.append(f"| {TRACKER_LABELS[v]} | {f(r['ms_per_step'], 2)} ({f(r['iqr_ms'][0], 2)} … {f(r['iqr_ms'][1], 2)}) | "
                    + ("—" if base else f"**{f(r['added_ms'], 2, sign=True)}**")
                    + f" | {f(r['thread_cpu_ms'], 2)}" + ("" if base else f" ({f(r['thread_cpu_added_ms'], 2, sign=True)})")
                    + f" | {f(r['best_ms'], 2)}" + ("" if base else f" ({f(r['best_added_ms'], 2, sign=True)})") + " |")
    rows += ["", "| fqntrace's added time ÷ torch's | medians | loop-thread CPU | best samples | per round: median (IQR) |",
             "|---|---:|---:|---:|---:|"]
    for pair, label in (("modtracker", "ModTracker"), ("moduletracker", "ModuleTracker")):
        r = s[pair]
        iqr = r["ratio_per_round_iqr"]
        rows.append(f"| {label} | **{f(r['ratio'], 2)}×** | {f(r['ratio_thread_cpu'], 2)}× | {f(r['ratio_best'], 2)}× | "
                    f"{f(r['ratio_per_round_median'], 2)}× ({f(iqr[0], 2)} … {f(iqr[1], 2)}) |")
    return "\n".join(rows)


def p4_table(results):
    p4 = results["p4"]
    rows = ["| format | events/s on one core (CPU time; IQR) | ns/event | events/s, wall time | bytes/event | "
            "JSON objects/event | instructions/event (callgrind) |", "|---|---:|---:|---:|---:|---:|---:|"]
    cg = p4.get("callgrind") or {}
    for fmt in ("chrome", "jsonl", "summary", "all"):
        d = p4["formats"].get(fmt)
        if d is None:
            continue
        iqr = d["cpu_events_per_s_iqr"]
        bpe = d.get("bytes_per_event")
        objs = f(d.get("json_objects_per_event"), 2) if fmt in ("chrome", "jsonl") else "—"
        ipe = (cg.get(fmt) or {}).get("instructions_per_event")
        rows.append(f"| {FORMAT_LABELS[fmt]} | **{f(d['cpu_events_per_s_median'])}** ({f(iqr[0])} … {f(iqr[1])}) | "
                    f"{f(d['ns_per_event_cpu'], 0)} | {f(d['wall_events_per_s_median'])} | "
                    + (f"{f(bpe, 1)}" if bpe is not None and fmt != "summary" else
                       (f"— ({f(d.get('file_bytes_16_steps'))} bytes for 16 steps, fixed size)" if fmt == "summary" else "—"))
                    + f" | {objs} | {f(ipe) if ipe else '—'} |")
    return "\n".join(rows)


def p5_table(results):
    p5 = results["p5"]
    fq, base, prof = p5["fqntrace"], p5["baseline"], p5["profiler"]
    rows = ["| run | ops | seconds | RSS at start | growth after warm-up (max) | growth per million ops | notes |",
            "|---|---:|---:|---:|---:|---:|---|",
            f"| fqntrace → Chrome trace on disk | {f(fq['ops'])} | {f(fq['seconds'], 1)} | "
            f"{f(fq['rss_start_mb'], 1)} MB | {f(fq['max_growth_after_warmup_mb'], 1)} MB | "
            f"{f(fq['slope_mb_per_million_ops'], 2, sign=True)} MB (fit) | "
            f"{'flat' if fq['flat'] else 'NOT flat'} (second half {f(fq['second_half_growth_mb'], 1, sign=True)} MB); "
            f"{f(fq['growth_from_start_mb'], 1)} MB from the very start |",
            f"| baseline (no tracing) | {f(base['ops'])} | {f(base['seconds'], 1)} | "
            f"{f(base['rss_start_mb'], 1)} MB | {f(base['max_growth_after_warmup_mb'], 1)} MB | "
            f"{f(base['slope_mb_per_million_ops'], 2, sign=True)} MB (fit) | for reference |",
            f"| torch.profiler (CPU), in memory | {f(prof['ops'])} | {f(prof['seconds'], 1)} | — | "
            f"{f(prof['growth_during_mb'], 1)} MB while recording | {f(prof['mb_per_million_ops'], 0)} MB "
            f"while recording; {f(prof['mb_per_million_ops_after_exit'], 0)} MB once stopped | "
            f"stopping took {f(prof['exit_seconds'], 1)} s; RSS +{f(prof['rss_after_exit_growth_mb'], 0)} MB after it |"]
    trace = ["| trace | value |", "|---|---:|",
             f"| file size | {f(fq['trace_bytes'])} bytes ({f(fq['trace_bytes'] / 2**30, 2)} GiB) |",
             f"| event lines (streaming line count − header − tail) | {f(fq['trace_event_lines'])} |",
             f"| `X` events per the footer | {f(fq['footer_x_events'])} |",
             f"| dropped events (writer fell behind) | {f(fq['dropped_events'])} "
             f"({f(100.0 * (fq['dropped_events'] or 0) / max(1, (fq['dropped_events'] or 0) + (fq['footer_x_events'] or 0)), 1)} %) |",
             f"| **bytes per event** | **{f(fq['bytes_per_event'], 1)}** |",
             f"| tracing throughput | {f(fq['ops_per_second'])} ops/s |"]
    return "\n".join(rows), "\n".join(trace)


# Section name (as in the document's markers) → its content.
def memory_section(results):
    """FQNTRACE_MEMORY's cost per op and per allocator report, beside profile_memory's."""
    m = results.get("memory")
    if not m or "fqntrace" not in m or "memory_cost" not in m["fqntrace"]:
        return None
    run = results.get("memory_run", results)
    lines = [f"- Run: `bench/memory/cost.py` ({run.get('kind')} run, {run.get('date')}, commit "
             f"{run.get('git_commit')}): {m['n_ops']:,} ops per round, {m['rounds']} rounds per "
             f"variant alternating off/on in one process, median over {m['processes']} "
             "process(es).",
             "",
             "| tracer | memory | alloc loop (ns/op) | + session stop | in-place loop (ns/op) | + session stop |",
             "|---|---|---:|---:|---:|---:|"]
    labels = {"baseline": "none", "fqntrace": "fqntrace", "profiler": "torch.profiler (CPU)"}
    for tracer, label in labels.items():
        for variant in ("off", "on"):
            v = m[tracer][variant]
            memory = {"off": "off", "on": "**on**"}[variant] if tracer != "baseline" else "-"
            if tracer == "baseline" and variant == "on":
                continue
            lines.append(f"| {label} | {memory} | {v['alloc']:.0f} | {v['alloc_with_stop']:.0f} | "
                         f"{v['inplace']:.0f} | {v['inplace_with_stop']:.0f} |")
    lines += ["", "| memory on costs | per op (alloc loop) | per report | + session stop, per report "
              "| per op without allocations |", "|---|---:|---:|---:|---:|"]
    per = m["reports_per_op"]["alloc"]
    for tracer in ("fqntrace", "profiler"):
        c = m[tracer]["memory_cost"]
        lines.append(f"| {labels[tracer]} | {c['alloc']:.0f} ns | {c['alloc'] / per:.0f} ns | "
                     f"{c['alloc_with_stop'] / per:.0f} ns | {c['inplace']:.0f} ns |")
    return "\n".join(lines)


def cli_section(mb):
    """P9: `scripts/bench.sh --cli MB`'s last run (bench/cli_bench.py writes
    bench/results-cli-MB.json; the other benchmarks leave it as it is)."""
    def section(results):
        path = os.path.join(HERE, f"results-cli-{mb}.json")
        if not os.path.exists(path):
            return f"*Not measured yet: `scripts/bench.sh --cli {mb}` fills this table.*"
        with open(path) as fh:
            return cli_table(json.load(fh))
    return section


def cli_table(results):
    """bench/cli_bench.py's run as Markdown: one row per verb and format, each against its target."""
    lines = [f"Package: {results['label']} (commit {results['git_commit']}), {results['date']}, "
             f"load average at the end {', '.join(f'{x:.1f}' for x in results['loadavg'])} "
             "(2 shared cores). Traces: "
             f"{results['chrome_mib']:.0f} MiB Chrome / {results['jsonl_mib']:.0f} MiB JSON Lines "
             f"(`tests/python/bigtrace.py {results['source']} OUT {results['mb']}`, a second rank "
             "with `--rank 1` for `merge` and `diff`, which count both inputs' events; `repair` "
             "counts the events it keeps of the trace cut at 72 %).", "",
             "| verb | format | events | CPU s (of which sys) | events / CPU-s | peak RSS MiB | wall s "
             f"| target (events / CPU-s, ≤ {CLI_RSS_LIMIT_MIB} MiB) | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results["rows"]:
        target = f"{r['target'] / 1e3:,.0f} k" if r.get("target") else "—"
        met = "—" if r.get("met") is None else "yes" if r["met"] else "**no**"
        status = f" ({r['status']})" if r["status"] else ""
        sys_s = f" ({r['sys_s']:.1f})" if "sys_s" in r else ""
        lines.append(f"| `{r['verb']}` | {r['format']} | {r['events']:,} | {r['cpu_s']:.1f}{sys_s} | "
                     f"{r['events_per_cpu_s'] / 1e3:,.0f} k | {r['peak_rss_mib']:.0f} | "
                     f"{r['wall_s']:.0f}{status} | {target} | {met} |")
    return "\n".join(lines)


SECTIONS = {
    "p9-cli-300": cli_section(300), "p9-cli-1024": cli_section(1024),
    "run": run_section,
    "memory": memory_section,
    "p1-settings": p1_settings, "p1": p1_section, "p1-ratios": p1_ratios,
    "p2-settings": p2_settings, "p2": p2_section, "p2-ab": p2_ab_section,
    "p2-compiled-ab": lambda results: p2_ab_section(results, "compiled_ab"),
    "p3-settings": p3_settings, "p3": p3_section,
    "p4-settings": p4_settings, "p4": p4_section,
    "p5-rss": p5_rss, "p5-trace": p5_trace,
    "targets": targets_table,
    "p1-views": p1_views, "mlp-split": mlp_split, "p6": p6_section, "p2-budget": p2_budget,
    "p3-per-module": p3_per_module, "p4-throughput": p4_throughput, "p4-bytes": p4_bytes,
    "p5-problems": p5_problems,
    "callgrind-settings": callgrind_settings, "callgrind-ops": callgrind_ops,
    "callgrind-mlp": callgrind_mlp, "hot-path": hot_path,
    "p7": p7_section, "p7-nice": p7_nice_section, "p4b": p4b_section, "p8": p8_section,
    "p8c": p8c_section,
}


# ---------------------------------------------------------------------------------------------
# The terminal


def table(results):
    """Plain-text summary for the terminal."""
    lines = []
    if "p1" in results:
        s = results["p1"]["summary"]
        lines.append(f"{'P1 mode':<18}{'ns/op':>8}{'added':>8}{'thrCPU':>8}{'MLP us':>9}{'MLP %':>8}")
        for m in results["p1"]["modes"]:
            o, mlp = s["ops"][m], s["mlp"][m]
            lines.append(f"{m:<18}{o['ns_per_op']:>8.0f}{o['added_ns']:>+8.0f}"
                         f"{(o.get('thread_cpu_ns') or 0):>8.0f}{mlp['us_per_step']:>9.1f}{mlp['slowdown_pct']:>+8.1f}")
    if "p2" in results:
        p2 = results["p2"]["summary"]
        lines.append(f"P2 transformer: baseline {p2['baseline_ms']:.1f} ms/step, fqntrace {p2['fqntrace_ms']:.1f} "
                     f"ms/step, slowdown {p2['slowdown_pct']:+.1f} %")
    if "p3" in results:
        v = results["p3"]["summary"]["variants"]
        lines.append("P3 trackers: " + ", ".join(f"{k} {v[k]['ms_per_step']:.2f} ms/step" for k in results["p3"]["variants"]))
    if "p4" in results and "formats" in results["p4"]:
        fm = results["p4"]["formats"]
        lines.append("P4 exporters: " + ", ".join(
            f"{k} {d['cpu_events_per_s_median'] / 1e6:.2f} M events/s"
            + (f" {d['bytes_per_event']:.1f} B/event" if k in ("chrome", "jsonl", "chrome_gz", "jsonl_gz")
               and "bytes_per_event" in d else "")
            for k, d in fm.items()))
    if "p5" in results:
        fq, pr = results["p5"]["fqntrace"], results["p5"]["profiler"]
        lines.append(f"P5 fqntrace: {fq['ops']:,} ops, RSS growth after warm-up {fq['max_growth_after_warmup_mb']:.1f} MB "
                     f"({'flat' if fq['flat'] else 'not flat'}), {fq['bytes_per_event']:.1f} bytes/event, "
                     f"{fq['dropped_events']} dropped; torch.profiler {pr['mb_per_million_ops']:.0f} MB per M ops")
    lines.append("")
    lines.append(targets_table(results).replace("**", ""))
    return "\n".join(lines)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.json")
    doc = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "benchmarks.md")
    with open(path) as fh:
        results = json.load(fh)
    with open(doc) as fh:
        text = update(fh.read(), results)
    with open(doc, "w") as fh:
        fh.write(text)
    print(table(results))


if __name__ == "__main__":
    main()
