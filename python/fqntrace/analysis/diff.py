"""`python -m fqntrace diff BASE NEW`: what got slower or faster per module between two runs.

Both sides are summaries (fqntrace.summarize; a trace is summarized first, a .summary.json is read
as is). One row per module, named by its full fqn, with its time per phase on both sides. Rows are
ordered by the absolute change of the module's SELF time (its own ops, all phases), so the module
whose code changed comes first and not the ancestors whose totals only inherit the change.

Threshold (`--threshold PCT`): a module *regresses* when its self time grew by more than PCT
percent and it is big enough to matter: its self time is at least `--min-share` percent (default
1%) of the op time of the side it is largest on. Smaller modules jitter by more than any sensible
threshold from run to run. Modules present on one side only are listed but never regress (a
renamed module would otherwise fail every gate).
"""
from fqntrace.analysis import traceio
from fqntrace.analysis.traceio import PHASES, TraceError

DEFAULT_MIN_SHARE_PCT = 1.0
EXIT_REGRESSION = 3  # apart from 1 (a file could not be read) and 2 (bad arguments)
PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "recomp"}


def _number(value):
    return value if traceio.is_number(value) else 0


def module_times(summary):
    """fqn -> {"module_type", "calls", phase -> {"self_ms", "total_ms", "ops", "flops",
    "top_ops"}} for every module of a summary, with paths that exist only as parents (a
    ModuleList the exporter did not write) filled in: no self time, children's totals."""
    modules = summary.get("modules") or {}
    out = {}
    for fqn, entry in modules.items():
        if not isinstance(entry, dict):
            continue
        row = {"module_type": str(entry.get("module_type") or ""),
               "calls": int(_number(entry.get("calls")))}
        for phase in PHASES:
            p = entry.get(phase) if isinstance(entry.get(phase), dict) else {}
            tops = p.get("top_ops") if isinstance(p.get("top_ops"), list) else []
            row[phase] = {"self_ms": float(_number(p.get("self_ms"))),
                          "total_ms": float(_number(p.get("total_ms"))),
                          "ops": int(_number(p.get("ops"))),
                          "flops": int(_number(p.get("flops"))),
                          "top_ops": [t for t in tops if isinstance(t, dict)]}
        out[fqn] = row
    for fqn in list(out):
        if fqn == "Global":
            continue
        parts = fqn.split(".")
        for k in range(1, len(parts)):
            ancestor = ".".join(parts[:k])
            if ancestor not in out:
                out[ancestor] = _parent_only(ancestor, out)
    return out


def _parent_only(fqn, rows):
    row = {"module_type": "", "calls": 0}
    children = [r for f, r in rows.items() if f.startswith(fqn + ".")
                and "." not in f[len(fqn) + 1:]]
    for phase in PHASES:
        row[phase] = {"self_ms": 0.0, "total_ms": sum(c[phase]["total_ms"] for c in children),
                      "ops": sum(c[phase]["ops"] for c in children),
                      "flops": sum(c[phase]["flops"] for c in children), "top_ops": []}
    return row


def total_op_ms(rows):
    return sum(r[p]["self_ms"] for r in rows.values() for p in PHASES)


def root_names(rows):
    return {f.split(".", 1)[0] for f in rows if f != "Global"}


def _pct(old, new):
    if old > 0:
        return 100.0 * (new - old) / old
    if new == 0:
        return 0.0
    return None  # no base time: a percentage says nothing


def compare(base, new, threshold=None, min_share=DEFAULT_MIN_SHARE_PCT, base_name="BASE",
            new_name="NEW"):
    """The diff of two summaries as a dict (the `--json` shape). Raises TraceError when the two
    sides trace different models (no root module in common)."""
    a, b = module_times(base), module_times(new)
    if not a or not b:
        empty = base_name if not a else new_name
        raise TraceError(f"{empty}: no modules in this trace; diff needs two traced runs")
    roots_a, roots_b = root_names(a), root_names(b)
    if roots_a and roots_b and not roots_a & roots_b:
        raise TraceError(f"{base_name} traces {', '.join(sorted(roots_a))} and {new_name} traces "
                         f"{', '.join(sorted(roots_b))}: different models; diff two runs of "
                         "the same model")
    total_a, total_b = total_op_ms(a), total_op_ms(b)
    rows = []
    for fqn in list(a) + [f for f in b if f not in a]:
        ra, rb = a.get(fqn), b.get(fqn)
        status = "both" if ra and rb else ("base_only" if ra else "new_only")
        self_a = sum(ra[p]["self_ms"] for p in PHASES) if ra else 0.0
        self_b = sum(rb[p]["self_ms"] for p in PHASES) if rb else 0.0
        tot_a = sum(ra[p]["total_ms"] for p in PHASES) if ra else 0.0
        tot_b = sum(rb[p]["total_ms"] for p in PHASES) if rb else 0.0
        row = {
            "fqn": fqn,
            "module_type": (rb or ra)["module_type"] or (ra or rb)["module_type"],
            "status": status,
            "base": {p: {"self_ms": ra[p]["self_ms"], "total_ms": ra[p]["total_ms"]}
                     for p in PHASES} if ra else None,
            "new": {p: {"self_ms": rb[p]["self_ms"], "total_ms": rb[p]["total_ms"]}
                    for p in PHASES} if rb else None,
            "self_ms": [round(self_a, 6), round(self_b, 6)],
            "self_change_ms": round(self_b - self_a, 6),
            "self_change_pct": _round(_pct(self_a, self_b) if status == "both" else None),
            "total_ms": [round(tot_a, 6), round(tot_b, 6)],
            "total_change_ms": round(tot_b - tot_a, 6),
            "total_change_pct": _round(_pct(tot_a, tot_b) if status == "both" else None),
        }
        big_enough = (status == "both" and (
            (total_a > 0 and 100.0 * self_a / total_a >= min_share)
            or (total_b > 0 and 100.0 * self_b / total_b >= min_share)))
        row["gated"] = bool(big_enough)
        row["regressed"] = bool(threshold is not None and big_enough
                                and row["self_change_pct"] is not None
                                and row["self_change_pct"] > threshold)
        rows.append(row)
    rows.sort(key=lambda r: (-abs(r["self_change_ms"]), r["status"] != "both", r["fqn"]))
    return {
        "base": {"trace": str(base.get("trace") or base_name), "op_ms": round(total_a, 6)},
        "new": {"trace": str(new.get("trace") or new_name), "op_ms": round(total_b, 6)},
        "op_change_ms": round(total_b - total_a, 6),
        "op_change_pct": _round(_pct(total_a, total_b)),
        "threshold_pct": threshold,
        "min_share_pct": min_share,
        "rows": rows,
        "regressions": [r["fqn"] for r in rows if r["regressed"]],
    }


def _round(value):
    return None if value is None else round(value, 3)


def _ms(value):
    if not value:
        return "-"
    return f"{value:.3f}" if abs(value) < 1e4 else f"{value:.0f}"


def _signed(value, suffix=""):
    if value is None:
        return "new" if suffix == "%" else "-"
    if value == 0:
        return "0"
    if suffix == "%":
        return (f"{value:+.1f}" if abs(value) < 1000 else f"{value:+.0f}") + suffix
    return f"{value:+.3f}"


def render(result, limit=None):
    """The diff as text lines: a title, one row per module (numbers first, full fqn last, so long
    names never push the columns apart) and a legend."""
    rows = result["rows"]
    phases = [p for p in PHASES if any(
        (r["base"] and r["base"][p]["total_ms"]) or (r["new"] and r["new"][p]["total_ms"])
        for r in rows)] or ["forward"]
    lines = []
    pct = result["op_change_pct"]
    lines.append(f"base {result['base']['trace']}: {result['base']['op_ms']:.3f} ms op time; "
                 f"new {result['new']['trace']}: {result['new']['op_ms']:.3f} ms "
                 f"({_signed(result['op_change_ms'])} ms"
                 + (f", {pct:+.1f}%" if pct is not None else "") + ")")
    lines.append("")
    num_w, pct_w = 10, 9
    header = []
    for p in phases:
        header += [f"{PHASE_SHORT[p]} base".rjust(num_w), f"{PHASE_SHORT[p]} new".rjust(num_w)]
    header += ["self Δms".rjust(num_w), "self Δ%".rjust(pct_w), "total Δms".rjust(num_w),
               "total Δ%".rjust(pct_w), " module"]
    lines.append(" ".join(header))
    lines.append("-" * len(" ".join(header)))
    shown = rows if limit is None else rows[:limit]
    for r in shown:
        cells = []
        for p in phases:
            cells.append(_ms(r["base"][p]["total_ms"] if r["base"] else 0).rjust(num_w))
            cells.append(_ms(r["new"][p]["total_ms"] if r["new"] else 0).rjust(num_w))
        self_pct = _signed(r["self_change_pct"], "%") if r["status"] == "both" else ""
        total_pct = _signed(r["total_change_pct"], "%") if r["status"] == "both" else ""
        cells += [_signed(r["self_change_ms"]).rjust(num_w), self_pct.rjust(pct_w),
                  _signed(r["total_change_ms"]).rjust(num_w), total_pct.rjust(pct_w)]
        mark = {"both": "", "base_only": "  (only in base)", "new_only": "  (only in new)"}
        flag = "  << over threshold" if r["regressed"] else ""
        cells.append(" " + r["fqn"] + mark[r["status"]] + flag)
        lines.append(" ".join(cells))
    if limit is not None and len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more modules (--all shows every one)")
    lines.append("")
    lines.append("ms per phase: op time of the module and its submodules; self: its own ops, "
                 "all phases; rows by |self Δms|")
    if result["threshold_pct"] is not None:
        n = len(result["regressions"])
        lines.append(f"threshold {result['threshold_pct']:g}%: {n} module(s) slower by more "
                     f"(modules with at least {result['min_share_pct']:g}% of op time)")
    return lines
