"""The tables of the benchmark parts P1-P8 in docs/benchmarks.md (bench/doc_tables.py puts them
between their marker lines): per op and MLP step, the transformer step's A/B runs, ModTracker,
the exporters, memory and trace size, the drain, DDP, callgrind's instruction counts. Each takes
bench/measured.json's results and returns Markdown, or None when the results have nothing for it.
"""

from costs import f, pct, table
from modes import CALLGRIND_DDP_STEP_MODES, CALLGRIND_MLP_MODES, CALLGRIND_OPS_MODES, TRACKER_LABELS
from modes import LABELS_BY_MODE as LABELS

FORMAT_LABELS = {
    "chrome": "Chrome trace",
    "jsonl": "JSON Lines",
    "summary": "per-module summary",
    "all": "all three at once",
}


def kv_table(rows):
    """A two-column Markdown table of (label, text) rows."""
    return table(["quantity", "value"], rows, "lr")


def spread(iqr, digits=0, sign=False, unit=""):
    """An IQR as the tables show it: '(low … high)'."""
    return f"({f(iqr[0], digits, sign)} … {f(iqr[1], digits, sign)}{unit})"


def with_added(value, added, digits=0, base=False):
    """'value (+added)', the value alone for the baseline."""
    return f(value, digits) + ("" if base else f" ({f(added, digits, sign=True)})")


def p2_ab_section(results, key="ab"):
    ab = results.get("p2", {}).get(key)
    if not ab:
        return None
    a = ab["summary"]
    head = "arm|ms/step (median of all steps)|slowdown|per process|per A B B A group: median (IQR)"
    groups = f"{pct(a.get('group_slowdown_pct_median'))} "
    groups += spread(a["group_slowdown_pct_iqr"], 1, True, f" %, {a.get('groups')} groups")
    traced = [
        "traced (fqntrace.profile)",
        f(a["fqntrace_ms"], 1),
        f"**{pct(a['slowdown_pct'])}**",
        ", ".join(map(pct, a["per_process_slowdown_pct"])),
        groups,
        pct(a["best_slowdown_pct"]),
    ]
    untraced = ["untraced", f(a["baseline_ms"], 1), *["—"] * 4]
    return table([*head.split("|"), "best step vs best step"], [untraced, traced], "lr")


def p5_problems(results):
    """Only what went wrong, if anything: P5 cut short by its budget, or events dropped."""
    if "p5" not in results:
        return None
    fq = results["p5"]["fqntrace"]
    rows = []
    if fq.get("stopped_by_budget"):
        done = f"{f(fq['ops'])}, {f(fq['ops_planned'])}"
        rows.append(("**stopped at its time budget**: ops done, ops planned", done))
    if fq.get("dropped_events"):
        total = fq["dropped_events"] + (fq["footer_x_events"] or 0)
        share = f(100.0 * fq["dropped_events"] / total, 1)
        rows.append(("**events dropped**", f"{f(fq['dropped_events'])} of {f(total)} ({share} %)"))
    return kv_table(rows) if rows else "P5 ran all its ops and dropped no event."


def callgrind_ops(results):
    modes = (results.get("callgrind") or {}).get("modes")
    if not modes:
        return None
    base = modes["baseline"]["main_thread_ir_per_op"]
    rows = []
    for m in (m for m in CALLGRIND_OPS_MODES if m in modes):
        r = modes[m]
        callbacks = "—"
        if "on_start_ir_per_op" in r:
            callbacks = f"{f(r['on_start_ir_per_op'])} + {f(r['on_end_ir_per_op'])}"
        ir = r["main_thread_ir_per_op"]
        added = "—" if m == "baseline" else f(ir - base, sign=True)
        rows.append([LABELS[m], f(ir), added, f(r["other_threads_ir_per_op"]), callbacks])
    head = (
        "mode|loop thread instructions/op|added vs baseline|other threads (drain) instructions/op"
    )
    return table([*head.split("|"), "fqntrace on_start + on_end (inclusive)"], rows, "lr")


def callgrind_mlp(results):
    mlp = (results.get("callgrind") or {}).get("mlp")
    if not mlp or "baseline" not in mlp:
        return None
    base = mlp["baseline"]["main_thread_ir_per_step"]
    rows = []
    for m in (m for m in CALLGRIND_MLP_MODES if m in mlp):
        v = mlp[m]["main_thread_ir_per_step"]
        added = (
            ["—", "—"] if m == "baseline" else [f(v - base, sign=True), pct(100 * (v / base - 1))]
        )
        rows.append([LABELS[m], f(v), *added, f(mlp[m]["other_threads_ir_per_step"])])
    head = "mode|instructions/step|added vs baseline|% of baseline|other threads/step"
    return table(head.split("|"), rows, "lr")


def p7_section(results):
    cpu = (results.get("drain") or {}).get("cpu")
    if not cpu:
        return None
    cg = ((results.get("callgrind") or {}).get("modes") or {}).get("fqntrace") or {}
    p4 = results.get("p4") or {}
    chrome = (p4.get("formats") or {}).get("chrome") or {}
    chrome_cg = (p4.get("callgrind") or {}).get("chrome") or {}
    loop = f"`torch.add` loop of {f(cpu['ops'])} ops, median of {cpu['runs']} processes"
    return kv_table(
        [
            (
                f"drain CPU per op event: process CPU − loop-thread CPU, {loop} (target ≤ 100 ns)",
                f"**{f(cpu['drain_ns_per_op'])} ns**",
            ),
            ("… each process", ", ".join(map(f, cpu["drain_ns_per_op_runs"])) + " ns"),
            ("loop-thread CPU per op in the same runs", f"{f(cpu['loop_ns_per_op'])} ns"),
            ("trace bytes per op of that loop", f(cpu["bytes_per_op"], 1)),
            (
                "drain-thread instructions per op event (callgrind, the same loop: *other "
                "threads* in P1's instruction table)",
                f(cg.get("other_threads_ir_per_op")),
            ),
            (
                "exporter benchmark, Chrome: instructions per event (callgrind), CPU ns per event",
                f"{f(chrome_cg.get('instructions_per_event'))}, {f(chrome.get('ns_per_event_cpu'))}",
            ),
        ]
    )


def p8_section(results):
    d = results.get("ddp")
    if not d:
        return None
    jobs = ", ".join(f(100 * r["overhead"], 1, sign=True) for r in d["runs"]) + " %"
    overhead = f"**{pct(100 * d['overhead_median'])}** {spread([100 * x for x in d['overhead_iqr']], 1, True)}"
    groups = f"{pct(100 * d['group_median'])} over {d['groups']} groups "
    groups += spread([100 * x for x in d["group_iqr"]], 1, True)
    row = [f(d["untraced_ms_median"], 2), f(d["traced_ms_median"], 2), overhead, jobs, groups]
    head = "untraced ms/step|traced ms/step|overhead, median over jobs (IQR)|each job"
    return table([*head.split("|"), "per A B B A group: median (IQR)"], [row], "r")


def p8c_section(results):
    """P8c: P8's model step in one process, instructions per step by mode (callgrind)."""
    steps = (results.get("callgrind") or {}).get("ddp_step") or {}
    if "baseline" not in steps:
        return None
    base = steps["baseline"]["all_threads_ir_per_step"]
    rows = []
    for mode in (m for m in CALLGRIND_DDP_STEP_MODES if m in steps):
        r = steps[mode]
        added = r["all_threads_ir_per_step"] - base
        added = "—" if mode == "baseline" else f"{f(added)} ({pct(100 * added / base)})"
        ir = (r["all_threads_ir_per_step"], r["main_thread_ir_per_step"])
        rows.append([LABELS[mode], *map(f, ir), added])
    head = "mode|instructions per step, all threads|loop thread|added per step, all threads"
    return table(head.split("|"), rows, "lr")


def p1_section(results):
    if "p1" not in results:
        return None
    p1 = results["p1"]
    rows = []
    for m in p1["modes"]:
        o, mlp, base = p1["summary"]["ops"][m], p1["summary"]["mlp"][m], m == "baseline"
        rows.append(
            [
                LABELS[m],
                f"{f(o['ns_per_op'])} {spread(o['iqr_ns'])}",
                "—" if base else f"**{f(o['added_ns'], sign=True)}**",
                with_added(o["thread_cpu_ns"], o.get("thread_cpu_added_ns"), base=base),
                f(o["process_cpu_ns"]),
                with_added(o["best_ns"], o.get("best_added_ns"), base=base),
                f"{f(mlp['us_per_step'], 1)} {spread(mlp['iqr_us'], 1)}",
                "—" if base else f"**{pct(mlp['slowdown_pct'])}**",
                "—" if base else pct(mlp["best_slowdown_pct"]),
            ]
        )
    head = (
        "mode|ns/op (IQR over rounds)|added ns/op|loop-thread CPU ns/op (added)|process CPU ns/op|"
        "best sample ns/op (added)|MLP µs/step (IQR)|MLP slowdown|MLP slowdown, best samples"
    )
    return table(head.split("|"), rows, "lr")


def p3_section(results):
    if "p3" not in results:
        return None
    p3 = results["p3"]
    rows = []
    for v in p3["variants"]:
        r, base = p3["summary"]["variants"][v], v == "none"
        rows.append(
            [
                TRACKER_LABELS[v],
                f"{f(r['ms_per_step'], 2)} {spread(r['iqr_ms'], 2)}",
                "—" if base else f"**{f(r['added_ms'], 2, sign=True)}**",
                with_added(r["thread_cpu_ms"], r["thread_cpu_added_ms"], 2, base),
                with_added(r["best_ms"], r["best_added_ms"], 2, base),
            ]
        )
    head = (
        "tracker|ms/step, median of all rounds (IQR)|added ms/step|loop-thread CPU ms/step (added)|"
        "best sample ms/step (added)"
    )
    return table(head.split("|"), rows, "lr")


def p4_section(results):
    p4 = results.get("p4", {})
    if "formats" not in p4:
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
        rows.append(
            [
                FORMAT_LABELS[fmt],
                rate,
                f(d["ns_per_event_cpu"]),
                f(d["wall_events_per_s_median"]),
                bpe,
                objs,
                f(ipe) if ipe else "—",
            ]
        )
    head = (
        "format|events/s on one core (CPU time; IQR)|ns/event|events/s, wall time|bytes/event|"
        "JSON objects/event|instructions/event (callgrind)"
    )
    return table(head.split("|"), rows, "lr")


def p5_rss(results):
    if "p5" not in results:
        return None
    fq, base, prof = (results["p5"][k] for k in ("fqntrace", "baseline", "profiler"))

    def start(r):  # ops, seconds, RSS at start, growth after warm-up, its slope
        growth = f"{f(r['max_growth_after_warmup_mb'], 1)} MB"
        slope = f"{f(r['slope_mb_per_million_ops'], 2, sign=True)} MB (fit)"
        return [f(r["ops"]), f(r["seconds"], 1), f"{f(r['rss_start_mb'], 1)} MB", growth, slope]

    flat = "flat" if fq["flat"] else "NOT flat"
    notes = (
        f"{flat} (second half {f(fq['second_half_growth_mb'], 1, sign=True)} MB); "
        f"{f(fq['growth_from_start_mb'], 1)} MB from the very start"
    )
    profiler = [
        "torch.profiler (CPU), in memory",
        f(prof["ops"]),
        f(prof["seconds"], 1),
        "—",
        f"{f(prof['growth_during_mb'], 1)} MB while recording",
        f"{f(prof['mb_per_million_ops'], 0)} MB while recording; "
        f"{f(prof['mb_per_million_ops_after_exit'], 0)} MB once stopped",
        f"stopping took {f(prof['exit_seconds'], 1)} s; "
        f"RSS +{f(prof['rss_after_exit_growth_mb'], 0)} MB after it",
    ]
    rows = [
        ["fqntrace → Chrome trace on disk", *start(fq), notes],
        ["baseline (no tracing)", *start(base), "for reference"],
        profiler,
    ]
    head = "run|ops|seconds|RSS at start|growth after warm-up (max)|growth per million ops|notes"
    return table(head.split("|"), rows, "lrrrrrl")
