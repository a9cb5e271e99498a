"""The tables of the benchmark parts P1-P8 in docs/benchmarks.md (bench/doc_tables.py puts them
between their marker lines): per op and MLP step, the transformer step and its A/B runs,
ModTracker, the exporters, memory and trace size, FQNTRACE_MEMORY, the drain, DDP, callgrind's
instruction counts. Each takes bench/measured.json's results and returns Markdown, or None when
the results have nothing for it.
"""

from costs import f
from modes import (
    CALLGRIND_DDP_STEP_MODES,
    CALLGRIND_MLP_MODES,
    CALLGRIND_OPS_MODES,
    TRACKER_LABELS,
)
from modes import LABELS_BY_MODE as LABELS

FORMAT_LABELS = {
    "chrome": "Chrome trace",
    "jsonl": "JSON Lines",
    "summary": "per-module summary",
    "all": "all three at once",
}


def kv_table(rows):
    """A two-column Markdown table of (label, text) rows."""
    return "\n".join(["| quantity | value |", "|---|---:|", *(f"| {k} | {v} |" for k, v in rows)])


def p2_section(results):
    if "p2" not in results:
        return None
    s = results["p2"]["summary"]
    bi, fi, pi = s["baseline_iqr_ms"], s["fqntrace_iqr_ms"], s["paired_slowdown_pct_iqr"]
    return "\n".join(
        [
            "| mode | ms/step, median over rounds (IQR) | slowdown | paired per round: median (IQR) | best step |",
            "|---|---:|---:|---:|---:|",
            f"| baseline | {f(s['baseline_ms'], 1)} ({f(bi[0], 1)} … {f(bi[1], 1)}) | — | — | — |",
            f"| fqntrace | {f(s['fqntrace_ms'], 1)} ({f(fi[0], 1)} … {f(fi[1], 1)}) | "
            f"**{f(s['slowdown_pct'], 1, sign=True)} %** | {f(s['paired_slowdown_pct_median'], 1, sign=True)} % "
            f"({f(pi[0], 1, sign=True)} … {f(pi[1], 1, sign=True)}) | {f(s['best_slowdown_pct'], 1, sign=True)} % |",
        ]
    )


def p2_ab_section(results, key="ab"):
    ab = results.get("p2", {}).get(key)
    if not ab:
        return None
    a = ab["summary"]
    iqr = a["group_slowdown_pct_iqr"]
    return "\n".join(
        [
            "| arm | ms/step (median of all steps) | slowdown | per process | per A B B A group: median (IQR) | best step vs best step |",
            "|---|---:|---:|---:|---:|---:|",
            f"| untraced | {f(a['baseline_ms'], 1)} | — | — | — | — |",
            f"| traced (fqntrace.profile) | {f(a['fqntrace_ms'], 1)} | **{f(a['slowdown_pct'], 1, sign=True)} %** | "
            + ", ".join(f"{f(x, 1, sign=True)} %" for x in a["per_process_slowdown_pct"])
            + f" | {f(a.get('group_slowdown_pct_median'), 1, sign=True)} % ({f(iqr[0], 1, sign=True)} … "
            f"{f(iqr[1], 1, sign=True)} %, {a.get('groups')} groups) | {f(a['best_slowdown_pct'], 1, sign=True)} % |",
        ]
    )


def p5_problems(results):
    """Only what went wrong, if anything: P5 cut short by its budget, or events dropped."""
    if "p5" not in results:
        return None
    fq = results["p5"]["fqntrace"]
    rows = []
    if fq.get("stopped_by_budget"):
        rows.append(
            (
                "**stopped at its time budget**: ops done, ops planned",
                f"{f(fq['ops'])}, {f(fq['ops_planned'])}",
            )
        )
    if fq.get("dropped_events"):
        total = fq["dropped_events"] + (fq["footer_x_events"] or 0)
        rows.append(
            (
                "**events dropped**",
                f"{f(fq['dropped_events'])} of {f(total)} "
                f"({f(100.0 * fq['dropped_events'] / total, 1)} %)",
            )
        )
    return kv_table(rows) if rows else "P5 ran all its ops and dropped no event."


def callgrind_ops(results):
    cg = results.get("callgrind")
    if not cg or "modes" not in cg:
        return None
    modes = cg["modes"]
    base = modes["baseline"]["main_thread_ir_per_op"]
    rows = [
        "| mode | loop thread instructions/op | added vs baseline | other threads (drain) instructions/op | "
        "fqntrace on_start + on_end (inclusive) |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in CALLGRIND_OPS_MODES:
        if m not in modes:
            continue
        r = modes[m]
        callbacks = (
            f"{f(r['on_start_ir_per_op'])} + {f(r['on_end_ir_per_op'])}"
            if "on_start_ir_per_op" in r
            else "—"
        )
        added = "—" if m == "baseline" else f(r["main_thread_ir_per_op"] - base, sign=True)
        rows.append(
            f"| {LABELS[m]} | {f(r['main_thread_ir_per_op'])} | {added} | "
            f"{f(r['other_threads_ir_per_op'])} | {callbacks} |"
        )
    return "\n".join(rows)


def callgrind_mlp(results):
    mlp = (results.get("callgrind") or {}).get("mlp")
    if not mlp or "baseline" not in mlp:
        return None
    base = mlp["baseline"]["main_thread_ir_per_step"]
    rows = [
        "| mode | instructions/step | added vs baseline | % of baseline | other threads/step |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in CALLGRIND_MLP_MODES:
        if m not in mlp:
            continue
        r = mlp[m]
        v = r["main_thread_ir_per_step"]
        added = (
            "— | —"
            if m == "baseline"
            else f"{f(v - base, sign=True)} | {f(100.0 * (v / base - 1.0), 1, sign=True)} %"
        )
        rows.append(f"| {LABELS[m]} | {f(v)} | {added} | {f(r['other_threads_ir_per_step'])} |")
    return "\n".join(rows)


def p7_section(results):
    d = results.get("drain") or {}
    cpu = d.get("cpu")
    if not cpu:
        return None
    cg = ((results.get("callgrind") or {}).get("modes") or {}).get("fqntrace") or {}
    p4 = results.get("p4") or {}
    chrome = (p4.get("formats") or {}).get("chrome") or {}
    chrome_cg = (p4.get("callgrind") or {}).get("chrome") or {}
    return kv_table(
        [
            (
                f"drain CPU per op event: process CPU − loop-thread CPU, `torch.add` loop of "
                f"{f(cpu['ops'])} ops, median of {cpu['runs']} processes (target ≤ 100 ns)",
                f"**{f(cpu['drain_ns_per_op'])} ns**",
            ),
            ("… each process", ", ".join(f(v) for v in cpu["drain_ns_per_op_runs"]) + " ns"),
            ("loop-thread CPU per op in the same runs", f"{f(cpu['loop_ns_per_op'])} ns"),
            ("trace bytes per op of that loop", f(cpu["bytes_per_op"], 1)),
            (
                "drain-thread instructions per op event (callgrind, the same loop: *other threads* in P1's instruction table)",
                f(cg.get("other_threads_ir_per_op")),
            ),
            (
                "exporter benchmark, Chrome: instructions per event (callgrind), CPU ns per event",
                f"{f(chrome_cg.get('instructions_per_event'))}, {f(chrome.get('ns_per_event_cpu'))}",
            ),
        ]
    )


def p7_nice_section(results):
    rows = (results.get("drain") or {}).get("nice")
    if not rows:
        return None
    lines = [
        "| drain thread nice (process 0) | events dropped | of | loop ops/s under the load |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        total = r["events"] + r["dropped"]
        lines.append(
            f"| +{r['nice']} | {f(r['dropped'])} ({f(100.0 * r['dropped'] / total, 1)} %) | "
            f"{f(total)} | {f(r['ops_per_s'])} |"
        )
    return "\n".join(lines)


def p8_section(results):
    d = results.get("ddp")
    if not d:
        return None
    lo, hi = d["overhead_iqr"]
    glo, ghi = d["group_iqr"]
    return "\n".join(
        [
            "| untraced ms/step | traced ms/step | overhead, median over jobs (IQR) | each job | "
            "per A B B A group: median (IQR) |",
            "|---:|---:|---:|---:|---:|",
            f"| {f(d['untraced_ms_median'], 2)} | {f(d['traced_ms_median'], 2)} | "
            f"**{f(100 * d['overhead_median'], 1, sign=True)} %** ({f(100 * lo, 1, sign=True)} … "
            f"{f(100 * hi, 1, sign=True)}) | "
            + ", ".join(f"{f(100 * r['overhead'], 1, sign=True)}" for r in d["runs"])
            + " % | "
            f"{f(100 * d['group_median'], 1, sign=True)} % over {d['groups']} groups "
            f"({f(100 * glo, 1, sign=True)} … {f(100 * ghi, 1, sign=True)}) |",
        ]
    )


def p8c_section(results):
    """P8c: P8's model step in one process, instructions per step by mode (callgrind)."""
    steps = (results.get("callgrind") or {}).get("ddp_step") or {}
    if "baseline" not in steps:
        return None
    base = steps["baseline"]["all_threads_ir_per_step"]
    lines = [
        "| mode | instructions per step, all threads | loop thread | added per step, all threads |",
        "|---|---:|---:|---:|",
    ]
    for mode in CALLGRIND_DDP_STEP_MODES:
        r = steps.get(mode)
        if r is None:
            continue
        added = r["all_threads_ir_per_step"] - base
        lines.append(
            f"| {LABELS[mode]} | {f(r['all_threads_ir_per_step'])} | "
            f"{f(r['main_thread_ir_per_step'])} | "
            + (
                "—"
                if mode == "baseline"
                else f"{f(added)} ({f(100 * added / base, 1, sign=True)} %)"
            )
            + " |"
        )
    return "\n".join(lines)


def p1_section(results):
    if "p1" not in results:
        return None
    p1 = results["p1"]
    s = p1["summary"]
    rows = [
        "| mode | ns/op (IQR over rounds) | added ns/op | loop-thread CPU ns/op (added) | "
        "process CPU ns/op | best sample ns/op (added) | MLP µs/step (IQR) | MLP slowdown | "
        "MLP slowdown, best samples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in p1["modes"]:
        o, mlp = s["ops"][m], s["mlp"][m]
        iqr, miqr = o["iqr_ns"], mlp["iqr_us"]
        base = m == "baseline"
        rows.append(
            f"| {LABELS[m]} | {f(o['ns_per_op'])} ({f(iqr[0])} … {f(iqr[1])}) | "
            + ("—" if base else f"**{f(o['added_ns'], sign=True)}**")
            + f" | {f(o['thread_cpu_ns'])}"
            + ("" if base else f" ({f(o['thread_cpu_added_ns'], sign=True)})")
            + f" | {f(o['process_cpu_ns'])} | {f(o['best_ns'])}"
            + ("" if base else f" ({f(o['best_added_ns'], sign=True)})")
            + f" | {f(mlp['us_per_step'], 1)} ({f(miqr[0], 1)} … {f(miqr[1], 1)}) | "
            + ("—" if base else f"**{f(mlp['slowdown_pct'], 1, sign=True)} %**")
            + " | "
            + ("—" if base else f"{f(mlp['best_slowdown_pct'], 1, sign=True)} %")
            + " |"
        )
    return "\n".join(rows)


def p3_section(results):
    if "p3" not in results:
        return None
    p3 = results["p3"]
    s = p3["summary"]
    rows = [
        "| tracker | ms/step, median of all rounds (IQR) | added ms/step | loop-thread CPU ms/step (added) | "
        "best sample ms/step (added) |",
        "|---|---:|---:|---:|---:|",
    ]
    for v in p3["variants"]:
        r = s["variants"][v]
        base = v == "none"
        rows.append(
            f"| {TRACKER_LABELS[v]} | {f(r['ms_per_step'], 2)} ({f(r['iqr_ms'][0], 2)} … {f(r['iqr_ms'][1], 2)}) | "
            + ("—" if base else f"**{f(r['added_ms'], 2, sign=True)}**")
            + f" | {f(r['thread_cpu_ms'], 2)}"
            + ("" if base else f" ({f(r['thread_cpu_added_ms'], 2, sign=True)})")
            + f" | {f(r['best_ms'], 2)}"
            + ("" if base else f" ({f(r['best_added_ms'], 2, sign=True)})")
            + " |"
        )
    return "\n".join(rows)


def p4_section(results):
    p4 = results.get("p4", {})
    if "formats" not in p4:
        return None
    rows = [
        "| format | events/s on one core (CPU time; IQR) | ns/event | events/s, wall time | bytes/event | "
        "JSON objects/event | instructions/event (callgrind) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    cg = p4.get("callgrind") or {}
    for fmt in ("chrome", "jsonl", "summary", "all"):
        d = p4["formats"].get(fmt)
        if d is None:
            continue
        iqr = d["cpu_events_per_s_iqr"]
        bpe = d.get("bytes_per_event")
        objs = f(d.get("json_objects_per_event"), 2) if fmt in ("chrome", "jsonl") else "—"
        ipe = (cg.get(fmt) or {}).get("instructions_per_event")
        rows.append(
            f"| {FORMAT_LABELS[fmt]} | **{f(d['cpu_events_per_s_median'])}** ({f(iqr[0])} … {f(iqr[1])}) | "
            f"{f(d['ns_per_event_cpu'], 0)} | {f(d['wall_events_per_s_median'])} | "
            + (
                f"{f(bpe, 1)}"
                if bpe is not None and fmt != "summary"
                else (
                    f"— ({f(d.get('file_bytes_16_steps'))} bytes for 16 steps, fixed size)"
                    if fmt == "summary"
                    else "—"
                )
            )
            + f" | {objs} | {f(ipe) if ipe else '—'} |"
        )
    return "\n".join(rows)


def p5_rss(results):
    if "p5" not in results:
        return None
    p5 = results["p5"]
    fq, base, prof = p5["fqntrace"], p5["baseline"], p5["profiler"]
    rows = [
        "| run | ops | seconds | RSS at start | growth after warm-up (max) | growth per million ops | notes |",
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
        f"stopping took {f(prof['exit_seconds'], 1)} s; RSS +{f(prof['rss_after_exit_growth_mb'], 0)} MB after it |",
    ]
    return "\n".join(rows)


def memory_section(results):
    """FQNTRACE_MEMORY's cost per op and per allocator report, beside profile_memory's."""
    m = results.get("memory")
    if not m or "fqntrace" not in m or "memory_cost" not in m["fqntrace"]:
        return None
    labels = {"fqntrace": "fqntrace", "profiler": "torch.profiler (CPU)"}
    lines = [
        "| memory on costs | per op (alloc loop) | per report | + session stop, per report "
        "| per op without allocations |",
        "|---|---:|---:|---:|---:|",
    ]
    per = m["reports_per_op"]["alloc"]
    for tracer in ("fqntrace", "profiler"):
        c = m[tracer]["memory_cost"]
        lines.append(
            f"| {labels[tracer]} | {c['alloc']:.0f} ns | {c['alloc'] / per:.0f} ns | "
            f"{c['alloc_with_stop'] / per:.0f} ns | {c['inplace']:.0f} ns |"
        )
    return "\n".join(lines)
