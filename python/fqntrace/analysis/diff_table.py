"""`diff`'s text: the table `python -m fqntrace diff` prints from diff.compare's result (a title,
one row per module, a legend) and its number formats. diff.py makes the result.
"""

from fqntrace.analysis import trace_events
from fqntrace.analysis.diff import confidence
from fqntrace.analysis.trace_events import PHASES

PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "recomp"}


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


def _interval(row):
    iv = row["interval_pct"]
    if iv is None:
        return ""
    lo, hi = iv
    return f"[{lo:+.0f},{hi:+.0f}]" if max(abs(lo), abs(hi)) >= 100 else f"[{lo:+.1f},{hi:+.1f}]"


def _p(value):
    if value is None:
        return ""
    return f"{value:.3f}" if value >= 0.001 else "<0.001"


def render(result, limit=None):
    """The diff as text lines: a title, one row per module (numbers first, full fqn last, so long
    names never push the columns apart) and a legend."""
    rows = result["rows"]
    tested = result["mode"] == "test"
    phases = [
        p
        for p in PHASES
        if any(
            (r["base"] and r["base"][p]["total_ms"]) or (r["new"] and r["new"][p]["total_ms"])
            for r in rows
        )
    ] or ["forward"]
    lines = []
    pct = result["op_change_pct"]
    unit = "ms op time per step (median)" if result["per_step"] else "ms op time"
    lines.append(
        f"base {result['base']['trace']}: {result['base']['op_ms']:.3f} {unit}; "
        f"new {result['new']['trace']}: {result['new']['op_ms']:.3f} ms "
        f"({_signed(result['op_change_ms'])} ms"
        + (f", {pct:+.1f}%" if pct is not None else "")
        + ")"
    )
    if result["per_step"]:
        lines.append(
            f"steps kept: base {result['base']['steps']}, new {result['new']['steps']}"
            + (
                f"; self time per step compared by a Mann-Whitney U test, alpha {result['alpha']:g}"
                if tested
                else ""
            )
        )
    step = result.get("step")
    if step:
        lines.append(
            f"op time per step: {step['base_ms']:.3f} -> {step['new_ms']:.3f} ms, "
            f"{_signed(step['change_pct'], '%')} {_interval(step)}% "
            f"p {_p(step['p_value'])}"
            + (
                " (every module alike: the machine's speed or a change everywhere; the "
                "rows compare each module at BASE's speed)"
                if result["measure"].endswith("speed_corrected")
                else ""
            )
        )
    if result["note"]:
        lines.append("note: " + result["note"])
    lines.append("")
    num_w, pct_w, iv_w, p_w = 10, 9, 17, 7
    header = []
    for p in phases:
        header += [f"{PHASE_SHORT[p]} base".rjust(num_w), f"{PHASE_SHORT[p]} new".rjust(num_w)]
    header += ["self Δms".rjust(num_w), "self Δ%".rjust(pct_w)]
    if tested:
        header += [f"{confidence(result['alpha'])} interval".rjust(iv_w), "p".rjust(p_w)]
    else:
        header += ["total Δms".rjust(num_w), "total Δ%".rjust(pct_w)]
    header.append(" module")
    lines.append(" ".join(header))
    lines.append("-" * len(" ".join(header)))
    shown = rows if limit is None else rows[:limit]
    for r in shown:
        cells = []
        for p in phases:
            cells.append(_ms(r["base"][p]["total_ms"] if r["base"] else 0).rjust(num_w))
            cells.append(_ms(r["new"][p]["total_ms"] if r["new"] else 0).rjust(num_w))
        both = r["status"] == "both"
        cells += [
            _signed(r["change_ms"]).rjust(num_w),
            (_signed(r["change_pct"], "%") if both else "").rjust(pct_w),
        ]
        if tested:
            cells += [
                (_interval(r) + "%" if r["interval_pct"] else "").rjust(iv_w),
                _p(r["p_value"]).rjust(p_w),
            ]
        else:
            total_pct = _signed(r["total_change_pct"], "%") if both else ""
            cells += [_signed(r["total_change_ms"]).rjust(num_w), total_pct.rjust(pct_w)]
        mark = {"both": "", "base_only": "  (only in base)", "new_only": "  (only in new)"}
        flag = (
            "  << over threshold"
            if r["regressed"]
            else (
                f"  (not significantly over {result['threshold_pct']:g}%)"
                if tested
                and both
                and r["significant"] is not None
                and result["threshold_pct"] is not None
                and r["gated"]
                and (r["change_pct"] or 0) > result["threshold_pct"]
                else ""
            )
        )
        cells.append(" " + trace_events.printable(r["fqn"]) + mark[r["status"]] + flag)
        lines.append(" ".join(cells))
    if limit is not None and len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more modules (--all shows every one)")
    lines.append("")
    what = (
        "median per step, module and submodules"
        if result["per_step"]
        else "op time of the module and its submodules"
    )
    if tested:
        at = (
            " at BASE's speed (each step's speed read from all modules)"
            if result["measure"].endswith("speed_corrected")
            else ""
        )
        own = (
            "thread CPU time in its own code (Global: its ops' wall time)"
            if result["measure"].startswith("cpu_")
            else "ops"
        )
        lines.append(
            f"ms per phase: {what}; self Δ: change of the module's own {own} per step"
            f"{at}: Hodges-Lehmann shift, its interval and the U test's p-value; "
            "significant changes first"
        )
    else:
        lines.append(f"ms per phase: {what}; self: its own ops, all phases; rows by |self Δms|")
    if result["threshold_pct"] is not None:
        n = len(result["regressions"])
        lines.append(
            f"threshold {result['threshold_pct']:g}%: {n} module(s) slower by more "
            f"than {result['threshold_pct']:g}%"
            + (f" (the whole {confidence(result['alpha'])} interval above it)" if tested else "")
            + f"; modules with at least {result['min_share_pct']:g}% of op time"
        )
    return lines
