"""`python -m fqntrace diff BASE NEW`: what got slower or faster per module between two runs.

Both sides are summaries (summarize.py; a trace is summarized first, a .summary.json is read
as is). One row per module, named by its full fqn, with its time per phase on both sides.

The time of a module is the one `summary` shows: per training step (ProfilerStep#N ranges), the
warm-up steps left out (`--exclude-steps`, default 0). With enough steps on both sides
(MIN_STEPS each) every module's SELF time per step (its own ops, all phases) in BASE is compared
with NEW's (fqntrace.analysis.stats): the change is the Hodges-Lehmann shift (median of all pairwise
differences) in percent of BASE's median (and that in ms), with its confidence interval at
`--alpha`, and the p-value of a two-sided Mann-Whitney U test. The samples are taken at BASE's
speed: each step's time divided by how slow that step ran, read from all modules at once
(stats.step_speeds) - a loaded machine slows every module of a step alike, one module's code
only itself (`--absolute` compares plain ms). The whole step's change in ms is shown apart.
Rows: with --threshold the modules over it first, then the significant changes (p < alpha),
largest first, then the rest by the change of the median; so the module whose code changed
comes first and not the ancestors whose totals only inherit the change.

The measure (`--measure`): in traces that carry CPU time (``self_cpu_ns``, plugin/thread_cpu.h),
the samples are each module's *thread CPU time* per step (`cpu`, the default): time its thread
waited for a core is not in it, so a busy machine does not inflate it, where wall time grows
by a preempted time slice at random. Wall time (op self time) stays in the table; `--measure
wall` tests it instead. `Global` (ops outside any module, whose forward has no CPU reading) is
always tested on wall time. Each row says its measure.

Threshold (`--threshold PCT`): a module *regresses* when its self time per step grew by more than
PCT percent with significance - the whole (1 - alpha) interval of the change lies above PCT (so
p < alpha too) - and it is big enough to matter: its self time is at least `--min-share` percent
(default 1%) of a step's op time on the side it is largest on.
Modules present on one side only are listed but never regress (a renamed module would otherwise
fail every gate).

Fallback (a one-line `note`): with fewer steps than MIN_STEPS on a side, or samples missing (a
.summary.json written before the core wrote them), the rule is the change of the per-step
median (or of the whole-run totals without steps) against PCT, with no test. `totals=True`
(`--totals`) compares whole-run totals the same way.
"""

from fqntrace.analysis import stats, step_times, trace_events
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import PHASES

DEFAULT_MIN_SHARE_PCT = 1.0
DEFAULT_ALPHA = 0.05
MIN_STEPS = 5  # per side; below it the test has almost no power (4 vs 4: p >= 0.029)
EXIT_REGRESSION = 3  # apart from 1 (a file could not be read) and 2 (bad arguments)


def _number(value):
    return value if trace_events.is_number(value) else 0


def module_times(summary, per_step=None):
    """fqn -> {"module_type", "calls", phase -> {"self_ms", "total_ms", "ops", "flops",
    "top_ops", "step_mad_ms", ["cpu_ms"]}, "step_self_ms", "step_self_cpu_ms",
    "step_spread_pct", "noisy"} for every module of a summary, with paths that exist only as
    parents (a ModuleList the exporter did not write) filled in: no self time, children's
    totals. per_step=True: self_ms / total_ms are the per-step medians (the summary's
    step_self_median_ms / step_median_ms); default: when the summary has steps."""
    if per_step is None:
        per_step = step_times.has_steps(summary)
    modules = summary.get("modules") or {}
    out = {}
    for fqn, entry in modules.items():
        if not isinstance(entry, dict):
            continue
        row = {
            "module_type": str(entry.get("module_type") or ""),
            "calls": int(_number(entry.get("calls"))),
        }
        for phase in PHASES:
            p = entry.get(phase) if isinstance(entry.get(phase), dict) else {}
            tops = p.get("top_ops") if isinstance(p.get("top_ops"), list) else []
            row[phase] = {
                "self_ms": float(_number(p.get("step_self_median_ms" if per_step else "self_ms"))),
                "total_ms": float(_number(p.get("step_median_ms" if per_step else "total_ms"))),
                "ops": int(_number(p.get("ops"))),
                "flops": int(_number(p.get("flops"))),
                "top_ops": [t for t in tops if isinstance(t, dict)],
                "step_mad_ms": float(_number(p.get("step_mad_ms"))),
            }
            if "device_ms" in p:  # an annotated torch.profiler trace with kernels
                row[phase]["device_ms"] = float(_number(p.get("device_ms")))
            cpu_key = "step_cpu_median_ms" if per_step else "cpu_ms"
            if cpu_key in p:  # the thread's CPU time, module and submodules
                row[phase]["cpu_ms"] = float(_number(p.get(cpu_key)))
        for key in ("step_self_ms", "step_self_cpu_ms"):
            samples = entry.get(key)
            row[key] = (
                [float(v) for v in samples if trace_events.is_number(v)]
                if per_step and isinstance(samples, list)
                else None
            )
        spread = entry.get("step_spread_pct")
        row["step_spread_pct"] = spread if trace_events.is_number(spread) else None
        row["noisy"] = entry.get("noisy") is True
        out[fqn] = row
    for fqn in list(out):
        if fqn == "Global":
            continue
        for ancestor in trace_events.ancestors(fqn):
            if ancestor not in out:
                out[ancestor] = _parent_only(ancestor, out)
    return out


def _parent_only(fqn, rows):
    row = {
        "module_type": "",
        "calls": 0,
        "step_self_ms": None,
        "step_self_cpu_ms": None,
        "step_spread_pct": None,
        "noisy": False,
    }
    children = [
        r for f, r in rows.items() if f.startswith(fqn + ".") and "." not in f[len(fqn) + 1 :]
    ]
    for phase in PHASES:
        row[phase] = {
            "self_ms": 0.0,
            "total_ms": sum(c[phase]["total_ms"] for c in children),
            "ops": sum(c[phase]["ops"] for c in children),
            "flops": sum(c[phase]["flops"] for c in children),
            "top_ops": [],
            "step_mad_ms": 0.0,
        }
    # No ops of its own: zero self time in every step (a sample the test can still compare).
    for key in ("step_self_ms", "step_self_cpu_ms"):
        counts = [len(c[key]) for c in children if c[key] is not None]
        if counts and len(set(counts)) == 1:
            row[key] = [0.0] * counts[0]
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


def _step_count(summary):
    steps = summary.get("steps")
    return int(_number(steps.get("count"))) if isinstance(steps, dict) else 0


def _op_ms(summary, rows, per_step):
    """A step's op time (median) or the whole run's: what --min-share is a share of."""
    if per_step:
        return float(_number(summary["steps"].get("median_op_ms")))
    return total_op_ms(rows)


def _mode(base, new, totals, base_name, new_name):
    """("test" | "median" | "totals", note or None): how the two sides can be compared."""
    if totals:
        return "totals", None
    n_base, n_new = _step_count(base), _step_count(new)
    if n_base == 0 or n_new == 0:
        which = " and ".join(n for n, c in ((base_name, n_base), (new_name, n_new)) if c == 0)
        return "totals", (
            f"{which}: no training steps (ProfilerStep ranges) kept; comparing "
            "whole-run totals without a significance test (record at least "
            f"{MIN_STEPS + 1} steps for the statistical gate)"
        )
    if n_base < MIN_STEPS or n_new < MIN_STEPS:
        return "median", (
            f"{min(n_base, n_new)} step(s) kept on a side, fewer than {MIN_STEPS}: "
            "comparing per-step medians without a significance test (record more "
            "steps or leave fewer out with --exclude-steps)"
        )
    if not any(
        isinstance(e, dict) and isinstance(e.get("step_self_ms"), list)
        for side in (base, new)
        for e in (side.get("modules") or {}).values()
    ):
        return "median", (
            "no per-step samples (a .summary.json from the core has medians only): "
            "comparing per-step medians without a significance test; pass the "
            "traces for the statistical gate"
        )
    return "test", None


MEASURES = ("cpu", "wall")
CPU_SAMPLES = "step_self_cpu_ms"
WALL_SAMPLES = "step_self_ms"


def _has_cpu(summary):
    return any(
        isinstance(e, dict) and isinstance(e.get(CPU_SAMPLES), list)
        for e in (summary.get("modules") or {}).values()
    )


def compare(
    base,
    new,
    threshold=None,
    min_share=DEFAULT_MIN_SHARE_PCT,
    base_name="BASE",
    new_name="NEW",
    alpha=DEFAULT_ALPHA,
    totals=False,
    absolute=False,
    measure="cpu",
):
    """The diff of two summaries as a dict (the `--json` shape). measure: "cpu" tests thread
    CPU time where both sides recorded it (else wall time), "wall" always wall time. Raises
    TraceError when the two sides trace different models (no root module in common)."""
    mode, note = _mode(base, new, totals, base_name, new_name)
    cpu = measure == "cpu" and mode == "test" and _has_cpu(base) and _has_cpu(new)
    per_step = mode != "totals"
    a, b = module_times(base, per_step), module_times(new, per_step)
    if not a or not b:
        empty = base_name if not a else new_name
        raise TraceError(f"{empty}: no modules in this trace; diff needs two traced runs")
    roots_a, roots_b = root_names(a), root_names(b)
    if roots_a and roots_b and not roots_a & roots_b:
        raise TraceError(
            f"{base_name} traces {', '.join(sorted(roots_a))} and {new_name} traces "
            f"{', '.join(sorted(roots_b))}: different models; diff two runs of "
            "the same model"
        )
    total_a, total_b = _op_ms(base, a, per_step), _op_ms(new, b, per_step)
    corrected = speed_corrected(a, b) if mode == "test" and not absolute else None
    corrected_cpu = speed_corrected(a, b, CPU_SAMPLES) if cpu and not absolute else None
    rows = []
    for fqn in list(a) + [f for f in b if f not in a]:
        ra, rb = a.get(fqn), b.get(fqn)
        status = "both" if ra and rb else ("base_only" if ra else "new_only")
        self_a = sum(ra[p]["self_ms"] for p in PHASES) if ra else 0.0
        self_b = sum(rb[p]["self_ms"] for p in PHASES) if rb else 0.0
        if per_step and ra and ra["step_self_ms"]:
            self_a = stats.median(ra["step_self_ms"])  # median of the sums over phases
        if per_step and rb and rb["step_self_ms"]:
            self_b = stats.median(rb["step_self_ms"])
        tot_a = sum(ra[p]["total_ms"] for p in PHASES) if ra else 0.0
        tot_b = sum(rb[p]["total_ms"] for p in PHASES) if rb else 0.0
        row = {
            "fqn": fqn,
            "module_type": (rb or ra)["module_type"] or (ra or rb)["module_type"],
            "status": status,
            "base": {p: _phase_times(ra[p]) for p in PHASES} if ra else None,
            "new": {p: _phase_times(rb[p]) for p in PHASES} if rb else None,
            "self_ms": [round(self_a, 6), round(self_b, 6)],
            "self_change_ms": round(self_b - self_a, 6),
            "self_change_pct": _round(_pct(self_a, self_b) if status == "both" else None),
            "total_ms": [round(tot_a, 6), round(tot_b, 6)],
            "total_change_ms": round(tot_b - tot_a, 6),
            "total_change_pct": _round(_pct(tot_a, tot_b) if status == "both" else None),
        }
        samples = CPU_SAMPLES if cpu and fqn != "Global" else WALL_SAMPLES
        fix = corrected_cpu if samples == CPU_SAMPLES else corrected
        row.update(
            _test(mode, ra, rb, alpha, row, fix.get(fqn) if fix is not None else None, samples)
        )
        big_enough = status == "both" and (
            (total_a > 0 and 100.0 * self_a / total_a >= min_share)
            or (total_b > 0 and 100.0 * self_b / total_b >= min_share)
        )
        row["gated"] = bool(big_enough)
        row["regressed"] = bool(
            threshold is not None and big_enough and _over_threshold(row, mode, threshold)
        )
        row["verdict"] = _verdict(row, mode)
        rows.append(row)
    if mode == "test":
        # Modules over the threshold first, then significant changes by evidence (the change
        # they surely made, _evidence), then the rest by the change of the median.
        rows.sort(
            key=lambda r: (
                not r["regressed"],
                not r["significant"],
                -abs(r["evidence_ms"] or 0.0),
                -abs(r["change_ms"] if r["significant"] else r["self_change_ms"]),
                r["status"] != "both",
                r["fqn"],
            )
        )
    else:
        rows.sort(key=lambda r: (-abs(r["self_change_ms"]), r["status"] != "both", r["fqn"]))
    return {
        "base": {
            "trace": str(base.get("trace") or base_name),
            "op_ms": round(total_a, 6),
            "steps": _step_count(base),
        },
        "new": {
            "trace": str(new.get("trace") or new_name),
            "op_ms": round(total_b, 6),
            "steps": _step_count(new),
        },
        "per_step": per_step,
        "mode": mode,
        "note": note,
        "alpha": alpha,
        "measure": (
            ("cpu_" + ("speed_corrected" if corrected_cpu is not None else "ms"))
            if cpu
            else "speed_corrected"
            if corrected is not None
            else "ms"
        ),
        "step": _step_change(base, new, alpha) if mode == "test" else None,
        "op_change_ms": round(total_b - total_a, 6),
        "op_change_pct": _round(_pct(total_a, total_b)),
        "threshold_pct": threshold,
        "min_share_pct": min_share,
        "rows": rows,
        "regressions": [r["fqn"] for r in rows if r["regressed"]],
    }


# Modules the step speed is read from: own time at least this share of BASE's step (smaller
# ones are a few ops, all jitter), and at least this many of them.
SPEED_MIN_SHARE = 0.01
SPEED_MIN_MODULES = 3


SPEED_OWN_OUT = 16  # up to this many modules a module's own time is left out of its steps' speed


def speed_corrected(a, b, key=WALL_SAMPLES):
    """{fqn: (base samples, new samples)} of every module's own time per step at BASE's median
    speed: each step's time divided by that step's speed (stats.step_speeds, read from the
    modules with at least SPEED_MIN_SHARE of the step; with few of them, from the others than
    the module itself, so that its own change does not move the median it is divided by). None
    when too few modules qualify."""
    both = [f for f in a if f in b and a[f][key] and b[f][key]]
    if not both:
        return None
    medians = {f: stats.median(a[f][key]) for f in both}
    step = sum(medians.values())
    reference = {f: m for f, m in medians.items() if step > 0 and m >= SPEED_MIN_SHARE * step}
    if len(reference) < SPEED_MIN_MODULES + 1:
        return None

    def speeds(leave_out):
        ref = {f: m for f, m in reference.items() if f != leave_out}
        out = []
        for side in (a, b):
            factors = stats.step_speeds({f: side[f][key] for f in ref}, ref, SPEED_MIN_MODULES)
            if factors is None or any(f <= 0 for f in factors):
                return None
            out.append(factors)
        return out

    shared = speeds(None)
    if shared is None:
        return None
    out = {}
    for f in both:
        pair = speeds(f) if f in reference and len(reference) <= SPEED_OWN_OUT else shared
        if pair is None or len(a[f][key]) != len(pair[0]) or len(b[f][key]) != len(pair[1]):
            out[f] = None
            continue
        out[f] = tuple(
            [v / s for v, s in zip(side[f][key], speed)]
            for side, speed in ((a, pair[0]), (b, pair[1]))
        )
    return out


def _test(mode, ra, rb, alpha, row, corrected=None, samples=WALL_SAMPLES):
    """The change of self time of one row: its estimate, interval and p-value (test mode), or
    the change of the medians / totals alone. The test compares the module's own time per step
    (`samples`: wall or CPU) at BASE's speed (`corrected`: speed_corrected()'s pair for it), else
    in plain ms; the estimate in ms is the change at BASE's median."""
    out = {
        "change_ms": row["self_change_ms"],
        "change_pct": row["self_change_pct"],
        "interval_ms": None,
        "interval_pct": None,
        "p_value": None,
        "significant": None,
        "measure": None,
        "evidence_ms": None,
    }
    if mode != "test" or not (ra and rb and ra[samples] and rb[samples]):
        return out
    a, b = ra[samples], rb[samples]
    if not any(a) and not any(b):
        return out  # no time of its own on either side (a container): nothing to test
    prefix = "cpu_" if samples == CPU_SAMPLES else ""
    measure = prefix + "ms"
    if corrected is not None:
        a, b = corrected
        measure = prefix + "speed_corrected"
    c = stats.Comparison(a, b, alpha)
    pct = [c.pct(v) for v in (c.shift, c.low, c.high)]
    base_ms = stats.median(ra[samples])

    def to_ms(p):
        return None if p is None else round(p / 100.0 * base_ms, 6)

    out.update(
        {
            "change_ms": to_ms(pct[0]) if pct[0] is not None else round(c.shift, 6),
            "change_pct": _round(pct[0]),
            "interval_ms": None if pct[1] is None else [to_ms(pct[1]), to_ms(pct[2])],
            "interval_pct": None if pct[1] is None else [_round(pct[1]), _round(pct[2])],
            "p_value": float(f"{c.p_value:.4g}"),
            "significant": c.significant(alpha),
            "measure": measure,
        }
    )
    if samples == CPU_SAMPLES:  # what the change is a change of, beside the wall-time columns
        out["cpu_ms"] = [round(base_ms, 6), round(stats.median(rb[samples]), 6)]
    out["evidence_ms"] = _evidence(out["interval_ms"])
    return out


def _evidence(interval_ms):
    """How much the module surely changed: the interval's end nearest zero, in ms (signed), 0
    when the interval holds zero. Rows rank by it: a tiny module with a few wild steps has a
    wide interval whose near end is small, however large its estimate; one whose every step
    moved has a narrow interval far from zero. The gate reads the same interval."""
    if not interval_ms or interval_ms[0] is None or interval_ms[1] is None:
        return 0.0
    low, high = interval_ms
    return low if low > 0 else high if high < 0 else 0.0


def step_op_ms(summary):
    """Op time of each kept step, in `kept` order (None when the summary does not say)."""
    steps = summary.get("steps") if isinstance(summary.get("steps"), dict) else {}
    kept, per_step = steps.get("kept"), steps.get("per_step")
    if not isinstance(kept, list) or not isinstance(per_step, list):
        return None
    by_step = {s.get("step"): s.get("op_ms") for s in per_step if isinstance(s, dict)}
    values = [by_step.get(k) for k in kept]
    return values if values and all(trace_events.is_number(v) for v in values) else None


def _step_change(base, new, alpha):
    """The whole step's op time compared in ms: what changed for every module alike (a slower
    machine, or a change everywhere), which the speed-corrected rows leave out."""
    op_a, op_b = step_op_ms(base), step_op_ms(new)
    if not op_a or not op_b:
        return None
    c = stats.Comparison(op_a, op_b, alpha)
    pct = [c.pct(v) for v in (c.shift, c.low, c.high)]
    return {
        "base_ms": round(c.base_median, 6),
        "new_ms": round(c.new_median, 6),
        "change_ms": round(c.shift, 6),
        "change_pct": _round(pct[0]),
        "interval_pct": None if pct[1] is None else [_round(pct[1]), _round(pct[2])],
        "p_value": float(f"{c.p_value:.4g}"),
        "significant": c.significant(alpha),
    }


def confidence(alpha):
    """The interval's confidence as the text shows it ("95%" at alpha 0.05)."""
    return f"{100 * (1 - alpha):g}%"


def _over_threshold(row, mode, threshold):
    """With the test: the whole interval lies above `threshold` (slower by more than it at the
    interval's confidence; a point estimate just over it is as often noise as not, and a run
    whose steps were preempted unevenly moves the estimate, not the interval's far side).
    Without: the change of the medians / totals is over it."""
    if mode == "test":
        return (
            bool(row["significant"])
            and row["interval_pct"] is not None
            and row["interval_pct"][0] > threshold
        )
    return row["change_pct"] is not None and row["change_pct"] > threshold


def _verdict(row, mode):
    """ "slower" / "faster" / "same" (no significant change) / "" (not compared): the one word
    `report BASE NEW` colours by."""
    if row["status"] != "both":
        return ""
    if mode == "test":
        if not row["significant"] or not row["change_ms"]:
            return "same"
    elif not row["change_ms"]:
        return "same"
    return "slower" if row["change_ms"] > 0 else "faster"


def _phase_times(phase):
    """A row's numbers of one phase; device time too for annotated torch.profiler traces."""
    out = {"self_ms": phase["self_ms"], "total_ms": phase["total_ms"]}
    if "device_ms" in phase:
        out["device_ms"] = phase["device_ms"]
    return out


def _round(value):
    return None if value is None else round(value, 3)
