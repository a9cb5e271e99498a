"""`python -m fqntrace summary | validate | repair | merge` on small synthetic traces written in the
core's exact layout (header line, one event per line joined by ",\\n", tail line)."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from fqntrace.analysis import cli, summarize, trace_damage, trace_events, whole_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = 1790857026000000000
PID = 1234
FWD_TID = 100
BWD_TID = 101


# ---------------------------------------------------------------------------------------------
# Writing traces the way the C++ core does


def op(name, ts, dur, fqn, phase="forward", tid=FWD_TID, cat="cpu_op", **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"fqn": fqn, "phase": phase, **args},
    }


def span(fqn, ts, dur, module_type, phase="forward", tid=FWD_TID):
    return op(
        f"nn.Module: {fqn}",
        ts,
        dur,
        fqn,
        phase,
        tid,
        cat="user_annotation",
        module_type=module_type,
    )


def flow(flow_id, src_tid, src_ts, dst_tid, dst_ts):
    return [
        {
            "ph": "s",
            "cat": "fwdbwd",
            "name": "fwdbwd",
            "id": flow_id,
            "pid": PID,
            "tid": src_tid,
            "ts": src_ts,
        },
        {
            "ph": "f",
            "cat": "fwdbwd",
            "name": "fwdbwd",
            "id": flow_id,
            "bp": "e",
            "pid": PID,
            "tid": dst_tid,
            "ts": dst_ts,
        },
    ]


def metadata(pid=PID, rank=0):
    def row(kind, tid, **args):
        return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}

    return [
        row("process_name", 0, name="python"),
        row("process_labels", 0, labels=f"rank {rank}"),
        row("thread_name", FWD_TID, name="thread 100"),
        row("thread_name", BWD_TID, name="thread 101"),
    ]


def event_line(event):
    """Like the core: times with exactly three decimals, keys in the given order."""
    parts = []
    for key, value in event.items():
        if key in ("ts", "dur") and isinstance(value, (int, float)):
            text = f"{value:.3f}"
        else:
            text = json.dumps(value, ensure_ascii=False)  # the core writes UTF-8 as is
        parts.append(f"{json.dumps(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def header_fields(rank, world_size, base):
    return (
        f'"schemaVersion": 1, "distributedInfo": {{"backend": "gloo", "rank": {rank}, '
        f'"world_size": {world_size}}}, "baseTimeNanoseconds": {base}'
    )


def chrome_text(events, rank=0, world_size=1, base=BASE, complete=True):
    head = (
        f'{{{header_fields(rank, world_size, base)}, "displayTimeUnit": "ms", '
        f'"traceName": "trace.json", "traceEvents": [\n'
    )
    text = head + ",\n".join(event_line(e) for e in events)
    if complete:
        n = sum(1 for e in events if e["ph"] == "X")
        text += (
            f'\n], "fqntrace": {{"version": "0.1.0", "events": {n}, "dropped_events": 0, '
            '"complete": true}}\n'
        )
    return text


def jsonl_text(events, rank=0, world_size=1, base=BASE, complete=True):
    text = f'{{"ph": "header", {header_fields(rank, world_size, base)}, "traceName": "t.jsonl"}}\n'
    text += "\n".join(event_line(e) for e in events)
    if complete:
        text += '\n{"ph": "footer", "events": 1, "dropped_events": 0, "complete": true}\n'
    return text


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def tiny_events():
    """A forward through Model > layers.0 > fc1, its backward on another thread, a recompute of
    layers.0 and Global ops; listed in end-time order per thread, as the core writes them.

    Top-level op times (us): forward fc1 15 (linear; addmm is inside it), layers.0 8 (relu),
    Model 5 + 8 (add; mul is inside a record_function range only), Global 2; backward fc1 30 + 4
    (two engine wrappers; the node and mm are inside), Global 1; recompute layers.0 7."""
    return metadata() + [
        op("aten::addmm", 14, 12, "Model.layers.0.fc1"),
        op("aten::linear", 13, 15, "Model.layers.0.fc1", **{"Sequence number": 1}),
        span("Model.layers.0.fc1", 12, 18, "Linear"),
        op("aten::relu", 32, 8, "Model.layers.0"),
        span("Model.layers.0", 10, 40, "Block"),
        op("aten::add", 60, 5, "Model"),
        op("aten::mul", 72, 8, "Model"),
        op("my_range", 70, 20, "Model", cat="user_annotation"),
        span("Model", 0, 100, "Model"),
        op("aten::sum", 110, 2, "Global"),
        op("aten::mm", 202, 18, "Model.layers.0.fc1", "backward", BWD_TID),
        op(
            "AddmmBackward0",
            201,
            24,
            "Model.layers.0.fc1",
            "backward",
            BWD_TID,
            **{"Sequence number": 1, "Fwd thread id": 1},
        ),
        *flow(7, FWD_TID, 13, BWD_TID, 201),
        op(
            "autograd::engine::evaluate_function: AddmmBackward0",
            200,
            30,
            "Model.layers.0.fc1",
            "backward",
            BWD_TID,
            **{"Sequence number": 1, "Fwd thread id": 1},
        ),
        op(
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            240,
            4,
            "Model.layers.0.fc1",
            "backward",
            BWD_TID,
            **{"Fwd thread id": 1},
        ),
        op("aten::relu", 255, 7, "Model.layers.0", "recompute", BWD_TID),
        span("Model.layers.0", 250, 20, "Block", "recompute", BWD_TID),
        op("aten::ones_like", 300, 1, "Global", "backward", BWD_TID),
    ]


@pytest.fixture
def tiny(tmp_path):
    return write(tmp_path / "trace.json", chrome_text(tiny_events()))


def run_main(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_cli(*argv):
    env = {k: v for k, v in os.environ.items() if k not in ("FQNTRACE", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", *map(str, argv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_error(rc, err, *needles):
    assert rc != 0
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fqntrace: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---------------------------------------------------------------------------------------------
# summary


def phase_numbers(entry, phase):
    p = entry[phase]
    return p["total_ms"], p["self_ms"], p["ops"]


def test_summary_json_self_and_total_per_module_and_phase(tiny, capsys):
    rc, out, err = run_main(capsys, "summary", tiny, "--json")
    assert rc == 0 and err == ""
    s = json.loads(out)
    m = s["modules"]
    # "Model.layers" (a ModuleList that never runs) gets a row of its own, as in the exporter.
    assert list(m) == ["Model", "Model.layers", "Model.layers.0", "Model.layers.0.fc1", "Global"]
    assert s["step_ms"] == pytest.approx(0.080)
    assert s["rank"] == 0 and s["complete"] is True
    # (total_ms, self_ms, ops) per phase, by hand from tiny_events' docstring.
    assert phase_numbers(m["Model.layers.0.fc1"], "forward") == pytest.approx((0.015, 0.015, 2))
    assert phase_numbers(m["Model.layers.0"], "forward") == pytest.approx((0.023, 0.008, 3))
    assert phase_numbers(m["Model"], "forward") == pytest.approx((0.036, 0.013, 5))
    assert phase_numbers(m["Global"], "forward") == pytest.approx((0.002, 0.002, 1))
    assert phase_numbers(m["Model.layers.0.fc1"], "backward") == pytest.approx((0.034, 0.034, 1))
    assert phase_numbers(m["Model.layers.0"], "backward") == pytest.approx((0.034, 0.0, 1))
    assert phase_numbers(m["Model"], "backward") == pytest.approx((0.034, 0.0, 1))
    assert phase_numbers(m["Global"], "backward") == pytest.approx((0.001, 0.001, 1))
    assert phase_numbers(m["Model.layers.0"], "recompute") == pytest.approx((0.007, 0.007, 1))
    assert phase_numbers(m["Model"], "recompute") == pytest.approx((0.007, 0.0, 1))
    assert phase_numbers(m["Model.layers.0.fc1"], "recompute") == (0, 0, 0)
    assert [(f, e["module_type"], e["calls"]) for f, e in m.items()] == [
        ("Model", "Model", 1),
        ("Model.layers", "", 0),
        ("Model.layers.0", "Block", 1),
        ("Model.layers.0.fc1", "Linear", 1),
        ("Global", "", 0),
    ]
    assert m["Model.layers.0.fc1"]["backward"]["top_ops"][0] == {
        "name": "autograd::engine::evaluate_function: AddmmBackward0",
        "ms": 0.03,
        "count": 1,
    }
    # Self times partition the step.
    assert sum(e[p]["self_ms"] for e in m.values() for p in trace_events.PHASES) == pytest.approx(
        0.080
    )


def test_summary_jsonl_equals_chrome(tiny, tmp_path, capsys):
    jsonl = write(tmp_path / "trace.jsonl", jsonl_text(tiny_events()))
    chrome = summarize.summarize(whole_file.load(tiny))
    lines = summarize.summarize(whole_file.load(jsonl))
    assert lines["modules"] == chrome["modules"] and lines["step_ms"] == chrome["step_ms"]


def test_summary_table_is_a_tree_within_100_columns(tiny):
    proc = run_cli("summary", tiny)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("module"))
    assert lines[header].split() == [
        "module",
        "type",
        "fwd",
        "ms",
        "bwd",
        "ms",
        "recomp",
        "ms",
        "%",
        "ops",
        "calls",
    ]
    rows = {
        line.split()[0]: line
        for line in lines[header + 2 :]
        if line and not line.startswith(("ms:", "cpu:"))
    }
    assert list(rows) == ["Model", "layers", "0", "fc1", "Global"]
    # Indentation: two spaces per fqn level; "layers" (a ModuleList: no span) sums its children.
    by_name = {line.strip().split()[0]: line for line in lines[header + 2 :] if line.strip()}
    assert by_name["layers"].startswith("  layers")
    assert by_name["0"].startswith("    0 ")
    assert by_name["fc1"].startswith("      fc1 ")
    expected = {  # fwd, bwd, recomp, %, ops, calls
        "Model": ["Model", "0.036", "0.034", "0.007", 96.25, "7", "1"],
        "layers": ["0.023", "0.034", "0.007", 80.0, "5", "0"],  # no type
        "fc1": ["Linear", "0.015", "0.034", "-", 61.25, "3", "1"],
        "Global": ["0.002", "0.001", "-", 3.75, "2", "0"],
    }
    for name, cells in expected.items():
        row = by_name[name].split()[1:]
        pct = cells.index(next(c for c in cells if isinstance(c, float)))
        assert row[:pct] + row[pct + 1 :] == cells[:pct] + cells[pct + 1 :], name
        assert float(row[pct]) == pytest.approx(cells[pct], abs=0.051), name
    assert "0.080 ms op time" in lines[0]
    # no thread CPU time in this trace: the legend says how to record it
    assert any(line.startswith("cpu: not recorded; FQNTRACE_CPU=1") for line in lines)


# With FQNTRACE_FLOPS=1 the trace has flops args, and the table a GFLOPs column (subtree sums).
def test_summary_table_shows_gflops_when_counted(tmp_path):
    events = tiny_events()
    for e in events:
        if e.get("name") == "aten::addmm":
            e["args"]["flops"] = 3_000_000_000
        if e.get("name") == "aten::mm":
            e["args"]["flops"] = 1_500_000_000
    proc = run_cli("summary", write(tmp_path / "flops.json", chrome_text(events)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("module"))
    assert lines[header].split()[-3:] == ["ops", "GFLOPs", "calls"]
    gflops = {
        line.split()[0]: line.split()[-2]
        for line in lines[header + 2 :]
        if line.strip() and not line.startswith(("ms:", "GFLOPs:", "cpu:"))
    }
    assert gflops == {
        "Model": "4.500",
        "layers": "4.500",
        "0": "4.500",
        "fc1": "4.500",
        "Global": "-",
    }
    assert (
        "GFLOPs"
        not in run_cli("summary", write(tmp_path / "none.json", chrome_text(tiny_events()))).stdout
    )


def test_summary_depth_filters_rows_and_json(tiny, capsys):
    rc, out, _ = run_main(capsys, "summary", tiny, "--depth", "1")
    assert rc == 0
    names = [
        line.split()[0] for line in out.splitlines() if line.startswith(("Model", "  ", "Global"))
    ]
    assert names == ["Model", "layers", "Global"]
    rc, out, _ = run_main(capsys, "summary", tiny, "--depth", "0", "--json")
    assert rc == 0 and list(json.loads(out)["modules"]) == ["Model", "Global"]


def test_summary_phase_and_sort(tmp_path, capsys):
    # Siblings run a (fast forward, slow backward) then b (slow forward, fast backward).
    events = metadata() + [
        op("aten::mm", 1, 2, "M.a"),
        span("M.a", 0, 5, "Linear"),
        op("aten::mm", 6, 9, "M.b"),
        span("M.b", 5, 12, "Linear"),
        span("M", 0, 20, "M"),
        op(
            "autograd::engine::evaluate_function: MmBackward0",
            30,
            1,
            "M.b",
            "backward",
            BWD_TID,
            **{"Fwd thread id": 1},
        ),
        op(
            "autograd::engine::evaluate_function: MmBackward0",
            40,
            6,
            "M.a",
            "backward",
            BWD_TID,
            **{"Fwd thread id": 1},
        ),
    ]
    path = write(tmp_path / "t.json", chrome_text(events))

    def order(*options):
        rc, out, _ = run_main(capsys, "summary", path, *options)
        assert rc == 0
        return [line.split()[0] for line in out.splitlines() if line.startswith("  ")], out

    assert order()[0] == ["a", "b"]  # execution order
    assert order("--sort", "fwd")[0] == ["b", "a"]
    assert order("--sort", "bwd")[0] == ["a", "b"]
    names, out = order("--phase", "forward")  # only that column, ordered by it
    assert names == ["b", "a"]
    assert "fwd ms" in out and "bwd ms" not in out and "recomp ms" not in out
    row_b = next(line for line in out.splitlines() if line.startswith("  b "))
    assert row_b.split() == ["b", "Linear", "0.009", "50.0", "1", "1"]  # 9 of 18 us of op time
    names, out = order("--phase", "backward", "--sort", "tree")
    assert names == ["a", "b"] and "bwd ms" in out and "fwd ms" not in out


def test_summary_from_summary_json_prints_the_same_table(tiny, tmp_path, capsys):
    rc, out, _ = run_main(capsys, "summary", tiny, "--json")
    stored = write(tmp_path / "trace.summary.json", out)
    rc, from_trace, _ = run_main(capsys, "summary", tiny)
    rc2, from_summary, err = run_main(capsys, "summary", stored)
    assert rc == rc2 == 0 and err == ""
    assert from_summary == from_trace


def test_summary_json_as_the_core_exporter_writes_it(tmp_path, capsys):
    # Sorted as strings (layers.10 before layers.2), ms with six decimals, extra fields.
    phase = {
        "total_ms": 0.0,
        "self_ms": 0.0,
        "ops": 0,
        "self_ops": 0,
        "flops": 0,
        "self_flops": 0,
        "comm_ms": 0.0,
        "comm_bytes": 0,
        "collectives": 0,
        "top_ops": [],
    }
    modules = {}
    for fqn, total in (
        ("Global", 1.0),
        ("Net", 6.0),
        ("Net.layers.10", 2.0),
        ("Net.layers.2", 4.0),
    ):
        modules[fqn] = {
            "module_type": "" if fqn == "Global" else "Block",
            "calls": 1,
            "forward": dict(phase, total_ms=total, self_ms=total if "." in fqn else 0.0),
            "backward": dict(phase),
            "recompute": dict(phase),
        }
    stored = write(
        tmp_path / "run.summary.json",
        json.dumps(
            {
                "trace": "run.json",
                "rank": 3,
                "step_ms": 7.0,
                "dropped_events": 0,
                "modules": modules,
            }
        ),
    )
    rc, out, err = run_main(capsys, "summary", stored)
    assert rc == 0 and err == ""
    rows = [line.split() for line in out.splitlines() if line.startswith(("Net", " ", "Global"))]
    assert [r[0] for r in rows] == ["Net", "layers", "2", "10", "Global"]
    assert rows[1][:3] == ["layers", "6.000", "-"]  # a parent-only path sums its children
    assert "(rank 3)" in out.splitlines()[0]


def test_summary_truncates_long_names_to_100_columns(tmp_path, capsys):
    long = "a_really_long_submodule_name_that_goes_on_and_on_" * 2
    events = metadata() + [
        op("aten::mm", 1, 1, f"Model.{long}"),
        span(f"Model.{long}", 0, 3, "VeryLongModuleTypeNameForTesting"),
        span("Model", 0, 4, "Model"),
    ]
    path = write(tmp_path / "t.json", chrome_text(events))
    rc, out, _ = run_main(capsys, "summary", path)
    assert rc == 0
    assert all(len(line) <= 100 for line in out.splitlines())
    row = next(line for line in out.splitlines() if line.startswith("  a_really"))
    assert "\u2026" in row or "..." in row
    assert row.split()[-1] == "1"  # the numbers survive the truncation


def test_summary_of_a_cut_trace_uses_the_complete_events(tiny, tmp_path, capsys):
    text = open(tiny).read()
    cut_at = text.index('"name": "aten::ones_like"')  # inside the last event line
    path = write(tmp_path / "cut.json", text[:cut_at])
    rc, out, err = run_main(capsys, "summary", path, "--json")
    assert rc == 0
    assert len(err.splitlines()) == 1 and "cut off" in err and "repair" in err
    s = json.loads(out)
    assert s["complete"] is False
    assert s["step_ms"] == pytest.approx(0.079)  # everything but ones_like
    assert "backward" not in [
        p for p in trace_events.PHASES if s["modules"]["Global"][p]["self_ms"]
    ]


def test_only_the_outermost_cpu_op_counts(tmp_path):
    events = metadata() + [
        op("aten::mm", 2, 6, "M.a"),  # inside a range inside an op
        op("inner_range", 1, 8, "M.a", cat="user_annotation"),
        op("MyFunction", 0, 10, "M.a"),  # the only top-level op here
        op("aten::add", 12, 3, "M.a"),
        span("M.a", 11, 5, "A"),  # same extent as nothing else
        op("aten::relu", 20, 4, "M"),
        op("aten::relu_", 20, 4, "M"),  # equal extent: one counts
        span("M.a", 0, 10, "A"),
        span("M", 0, 30, "M"),
    ]
    s = summarize.summarize(whole_file.load(write(tmp_path / "t.json", chrome_text(events))))
    fwd = {f: (e["forward"]["self_ms"], e["forward"]["self_ops"]) for f, e in s["modules"].items()}
    assert fwd == {"M": (0.004, 2), "M.a": (0.013, 3)}
    assert s["modules"]["M.a"]["calls"] == 2 and s["step_ms"] == pytest.approx(0.017)
    assert [t["name"] for t in s["modules"]["M.a"]["forward"]["top_ops"]] == [
        "MyFunction",
        "aten::add",
    ]


# ---------------------------------------------------------------------------------------------
# validate


def test_validate_accepts_good_traces(tiny, tmp_path, capsys):
    rc, out, err = run_main(capsys, "validate", tiny)
    assert (rc, out, err) == (0, f"ok: {len(tiny_events())} events, 2 threads\n", "")
    jsonl = write(tmp_path / "t.jsonl", jsonl_text(tiny_events()))
    rc, out, err = run_main(capsys, "validate", jsonl)
    assert (rc, out) == (0, f"ok: {len(tiny_events())} events, 2 threads\n")


def test_validate_allows_one_nanosecond_of_rounding(tmp_path, capsys):
    events = metadata() + [
        op("aten::mm", 1.000, 2.001, "M"),
        span("M", 1.000, 2.000, "M"),
        op("aten::add", 3.000, 1.000, "M"),
    ]
    path = write(tmp_path / "t.json", chrome_text(events))
    assert run_main(capsys, "validate", path)[:2] == (0, "ok: 7 events, 1 threads\n")


def mutate(events, name, **changes):
    """A copy of events with the first event named `name` changed (args merged)."""
    out = [dict(e) for e in events]
    for e in out:
        if e.get("name") == name:
            args = changes.pop("args", None)
            e.update(changes)
            if args is not None:
                e["args"] = {k: v for k, v in {**e["args"], **args}.items() if v is not None}
            return out
    raise AssertionError(name)


def without(event_dict, key):
    return {k: v for k, v in event_dict.items() if k != key}


BAD_EVENTS = [
    ("negative dur", lambda ev: mutate(ev, "aten::add", dur=-1.0), "dur is negative"),
    (
        "no dur",
        lambda ev: [without(e, "dur") if e.get("name") == "aten::add" else e for e in ev],
        '"dur" is missing',
    ),
    (
        "no tid",
        lambda ev: [without(e, "tid") if e.get("name") == "aten::add" else e for e in ev],
        '"tid" is missing',
    ),
    ("no fqn", lambda ev: mutate(ev, "aten::add", args={"fqn": None}), "args.fqn is missing"),
    (
        "bad phase",
        lambda ev: mutate(ev, "aten::add", args={"phase": "sideways"}),
        'args.phase is "sideways"',
    ),
    (
        "partial overlap",
        lambda ev: mutate(ev, "aten::add", ts=95.0, dur=10.0),
        "overlap without nesting",
    ),
    (
        "two flow starts",
        lambda ev: ev + [flow(7, FWD_TID, 13, BWD_TID, 201)[0]],
        'flow id 7 (cat "fwdbwd", first at traceEvents[16] (line 18)) has 2 "s" and 1 "f"',
    ),
    (
        "flow without end",
        lambda ev: ev + [flow(8, FWD_TID, 13, BWD_TID, 201)[0]],
        'flow id 8 (cat "fwdbwd", first at traceEvents[23] (line 25)) has 1 "s" and 0 "f"',
    ),
    (
        "fqn without span",
        lambda ev: mutate(ev, "aten::add", args={"fqn": "Model.ghost"}),
        'has fqn "Model.ghost" but the trace has no module span',
    ),
    (
        "depth not the nesting",
        lambda ev: mutate(
            mutate(ev, "aten::linear", args={"depth": 1}), "aten::addmm", args={"depth": 3}
        ),
        'traceEvents[4] (line 6) "aten::addmm" has depth 3 but is nested 2 deep: inside '
        'traceEvents[5] (line 7) '
        '"aten::linear" at depth 1',
    ),
    (
        "module entry without class",
        lambda ev: ev + [module_entry("Model.ghost", None)],
        "a module table entry needs args.fqn (not empty) and args.module_type",
    ),
]


def module_entry(fqn, module_type, parent=None):
    args = {"fqn": fqn, "module_type": module_type, "parent": parent}
    return {
        "ph": "M",
        "name": "fqntrace_module",
        "pid": 1,
        "tid": 0,
        "args": {k: v for k, v in args.items() if v is not None},
    }


def test_validate_accepts_a_module_table_entry_for_a_module_without_span(tmp_path, capsys):
    # An exported or scripted submodule owns gradient accumulation but never runs as a scope.
    events = mutate(tiny_events(), "aten::add", args={"fqn": "Model.ghost"})
    path = write(
        tmp_path / "t.json",
        chrome_text(events[:2] + [module_entry("Model.ghost", "Linear", "Model")] + events[2:]),
    )
    rc, out, err = run_main(capsys, "validate", path)
    assert (rc, err) == (0, "") and out.startswith("ok:")
    rc, out, _ = run_main(capsys, "summary", path, "--json")
    assert json.loads(out)["modules"]["Model.ghost"]["module_type"] == "Linear"


@pytest.mark.parametrize(
    "mutation, expected", [(m, e) for _, m, e in BAD_EVENTS], ids=[i for i, _, _ in BAD_EVENTS]
)
def test_validate_rejects_bad_events(tmp_path, capsys, mutation, expected):
    path = write(tmp_path / "t.json", chrome_text(mutation(tiny_events())))
    rc, out, err = run_main(capsys, "validate", path)
    assert rc == 1 and out == ""
    assert_one_line_error(rc, err, path, expected)


def test_validate_reports_the_first_problem_in_order(tmp_path, capsys):
    # Bad schemaVersion and an overlap: the top-level problem comes first.
    text = chrome_text(mutate(tiny_events(), "aten::add", ts=95.0, dur=10.0))
    path = write(tmp_path / "t.json", text.replace('"schemaVersion": 1', '"schemaVersion": 2'))
    assert_one_line_error(*run_main(capsys, "validate", path)[::2], "schemaVersion is 2")


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda t: t.replace('"schemaVersion": 1, ', ""), "no schemaVersion"),
        (lambda t: t.replace(', "world_size": 1', ""), "distributedInfo.world_size is missing"),
        (lambda t: t.replace('"rank": 0', '"rank": 5'), "needs 0 <= rank < world_size"),
        (
            lambda t: t.replace('"traceEvents": [', '"traceEvents": {"x": [').replace(
                "\n], ", "\n]}, "
            ),
            "traceEvents is missing or not a list",
        ),
        (
            lambda t: t.replace('"name": "aten::add"', '"name": "aten::add" "oops"'),
            "not valid JSON",
        ),
        (
            lambda t: t[: t.index('"name": "aten::add"')],
            "truncated (no closing tail; 9 complete events); run: python -m fqntrace repair",
        ),
        (lambda t: t[: t.rindex("\n]")], "truncated"),
    ],
)
def test_validate_rejects_bad_files(tiny, tmp_path, capsys, edit, expected):
    path = write(tmp_path / "t.json", edit(open(tiny).read()))
    rc, out, err = run_main(capsys, "validate", path)
    assert out == ""
    assert_one_line_error(rc, err, expected)


def test_validate_jsonl_problems(tmp_path, capsys):
    text = jsonl_text(tiny_events())
    cut = write(tmp_path / "cut.jsonl", text[: text.index('"aten::ones_like"')])
    assert_one_line_error(
        *run_main(capsys, "validate", cut)[::2],
        "truncated (its last line is partial",
        f"run: python -m fqntrace repair {cut}",
    )
    bad = write(tmp_path / "bad.jsonl", jsonl_text(mutate(tiny_events(), "aten::add", dur=-2.0)))
    assert_one_line_error(
        *run_main(capsys, "validate", bad)[::2], 'event[9] (line 11) "aten::add": dur is negative'
    )
    damaged = write(tmp_path / "damaged.jsonl", text.replace('"aten::add"', '"aten::add', 1))
    assert_one_line_error(
        *run_main(capsys, "validate", damaged)[::2], "line 11 is not valid JSON", "damaged"
    )


# ---------------------------------------------------------------------------------------------
# repair


def cut_points(text):
    """Byte offsets to cut at: right after the header, mid-line, at a line end, after a ',',
    between a flow's "s" and "f", inside the tail."""
    head_end = text.index("[\n") + 2
    lines_at = [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    return {
        "after header": head_end,
        "mid first event": head_end + 10,
        "after a comma": lines_at[5] - 1,
        "at a line start": lines_at[7],
        "mid line": lines_at[9] + 30,
        "inside Model, before its span": text.index('"aten::mul"'),
        "between a flow's ends": text.index('{"ph": "f"'),
        "end of an event": lines_at[12] - 2,
        "before the tail": text.rindex("\n]"),
        "mid tail": text.rindex("\n]") + 12,
    }


def test_repair_keeps_every_complete_event_at_any_cut(tiny, tmp_path, capsys):
    text = open(tiny).read()
    events = json.loads(text)["traceEvents"]
    ends = _event_line_ends(text)
    for label, at in cut_points(text).items():
        path = write(tmp_path / "cut.json", text[:at])
        # The events whose line is entirely before the cut; anything after them is partial.
        n = sum(1 for end in ends if end <= at)
        kept_end = ends[n - 1] if n else text.index("[\n") + 1
        partial = text[kept_end:at].strip(" \n,") != ""
        rc, out, err = run_main(capsys, "repair", path)
        assert rc == 0 and err == "", label
        assert out == (
            f"repaired: kept {n} events "
            f"({'dropped 1 partial line' if partial else 'no partial line'})\n"
        ), label
        repaired = json.load(open(path))
        assert repaired["traceEvents"] == events[:n], label
        assert (
            repaired["fqntrace"]["complete"] is False and repaired["fqntrace"]["repaired"] is True
        )
        assert repaired["schemaVersion"] == 1 and repaired["distributedInfo"]["rank"] == 0
        rc, out, err = run_main(capsys, "validate", path)
        assert rc == 0 and out.startswith(f"ok: {n} events"), (label, err)
        # What a cut may leave unmatched is allowed in an incomplete trace, and said so.
        if label == "inside Model, before its span":
            assert "allowed 1 fqn whose module span is missing" in out
        if label == "between a flow's ends":
            assert "allowed 1 flow missing one end" in out
        # The complete events are kept byte for byte, still one per line.
        fixed = open(path).read()
        assert fixed.startswith(text[:kept_end]), label
        assert len(fixed.splitlines()) == 1 + n + 1, label
        assert run_main(capsys, "repair", path)[1] == f"already complete: {n} events\n"


def _event_line_ends(text):
    """Offset just past each event (its closing brace) in the core's layout."""
    ends = []
    start = text.index("[\n") + 2
    for line in text[start:].split(",\n"):
        line = line.split("\n]", 1)[0]
        start += len(line)
        ends.append(start)
        start += 2
    return ends


def test_repair_output_option_and_complete_file_untouched(tiny, tmp_path, capsys):
    before = open(tiny, "rb").read()
    stat = os.stat(tiny)
    rc, out, _ = run_main(capsys, "repair", tiny)
    assert (rc, out) == (0, f"already complete: {len(tiny_events())} events\n")
    assert open(tiny, "rb").read() == before and os.stat(tiny).st_mtime_ns == stat.st_mtime_ns

    text = before.decode()
    cut = write(tmp_path / "cut.json", text[: text.index('"aten::mul"')])
    out_path = tmp_path / "fixed.json"
    rc, out, _ = run_main(capsys, "repair", cut, "-o", out_path)
    assert (
        rc == 0 and out == f"repaired: kept 10 events (dropped 1 partial line); wrote {out_path}\n"
    )
    assert open(cut).read() == text[: text.index('"aten::mul"')]  # input untouched
    assert len(json.load(open(out_path))["traceEvents"]) == 10
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".fqntrace-")]  # no temp left


def test_repair_cut_inside_a_multibyte_character(tmp_path, capsys):
    events = metadata() + [
        op("aten::mm", 1, 1, "Mod\u00e8le"),
        span("Mod\u00e8le", 0, 3, "M\u00e8"),
    ]
    data = chrome_text(events).encode()
    cut = data.rindex("\u00e8".encode()) + 1  # between the two bytes of the last è
    path = tmp_path / "t.json"
    path.write_bytes(data[:cut])
    rc, out, _ = run_main(capsys, "repair", path)
    assert (rc, out) == (0, "repaired: kept 5 events (dropped 1 partial line)\n")
    fixed = path.read_bytes()
    kept = data.index(b"}},\n", data.index(b'"aten::mm"')) + 2
    assert fixed.startswith(data[:kept]) and fixed[kept:].startswith(b"\n], ")
    assert json.loads(fixed.decode("utf-8"))["traceEvents"][-1]["args"]["fqn"] == "Mod\u00e8le"


def test_repair_jsonl(tmp_path, capsys):
    text = jsonl_text(tiny_events())
    path = write(tmp_path / "t.jsonl", text[: text.index('"aten::ones_like"')])
    rc, out, _ = run_main(capsys, "repair", path)
    assert (rc, out) == (
        0,
        f"repaired: kept {len(tiny_events()) - 1} events (dropped 1 partial line)\n",
    )
    lines = open(path).read().splitlines()
    assert json.loads(lines[-1])["ph"] == "footer" and json.loads(lines[-1])["repaired"] is True
    assert lines[:-1] == text.splitlines()[: len(lines) - 1]
    assert run_main(capsys, "validate", path)[0] == 0


def test_repair_refuses_what_is_not_a_cut(tiny, tmp_path, capsys):
    text = open(tiny).read()
    no_header = write(tmp_path / "h.json", text[:40])
    assert_one_line_error(*run_main(capsys, "repair", no_header)[::2], "no valid header")
    assert open(no_header).read() == text[:40]
    damaged = write(tmp_path / "d.json", text.replace('"aten::add"', '"aten::add', 1)[:-40])
    assert_one_line_error(*run_main(capsys, "repair", damaged)[::2], "line 11", "damaged")


def test_the_reader_names_damage_at_any_size(tiny, tmp_path, capsys, monkeypatch):
    # The damaged line comes from the stream itself; where the JSON breaks is json's verdict on
    # the whole text, or (a file past DESCRIBE_BYTES) the stream's: the same place here.
    text = open(tiny).read()
    damaged = write(tmp_path / "d.json", text.replace('"aten::add"', '"aten::add" "oops"', 1))
    small = [run_main(capsys, verb, damaged) for verb in ("validate", "summary", "repair")]
    monkeypatch.setattr(trace_damage, "DESCRIBE_BYTES", 16)
    assert [run_main(capsys, verb, damaged) for verb in ("validate", "summary", "repair")] == small
    assert_one_line_error(*small[0][::2], "not valid JSON (Expecting ',' delimiter: line 11 column")
    assert_one_line_error(*small[1][::2], "line 11 is not valid JSON", "damaged")
    assert_one_line_error(*small[2][::2], "line 11 is not valid JSON", "damaged")


def test_whole_traces_come_from_the_stream(tiny, tmp_path, capsys):
    # gzip is told by the file's first bytes; top-level fields after traceEvents (a
    # torch.profiler trace's traceName) belong to the loaded trace's header.
    packed = tmp_path / "packed.json"
    packed.write_bytes(gzip.compress(open(tiny, "rb").read()))
    assert run_main(capsys, "summary", "--json", packed) == run_main(
        capsys, "summary", "--json", tiny
    )
    doc = json.load(open(tiny))
    moved = write(
        tmp_path / "moved.json",
        json.dumps(
            {
                "traceEvents": doc["traceEvents"],
                **{k: v for k, v in doc.items() if k != "traceEvents"},
            }
        ),
    )
    trace = whole_file.load(moved)
    assert trace.header == {k: v for k, v in doc.items() if k not in ("traceEvents", "fqntrace")}
    assert trace.events == doc["traceEvents"] and trace.tail == doc["fqntrace"]
    assert not trace.cut and trace.event_lines is None  # one line: no line of its own
    assert run_main(capsys, "repair", moved)[1] == f"already complete: {len(trace.events)} events\n"


# ---------------------------------------------------------------------------------------------
# merge


def rank_events(pid):
    out = []
    for e in tiny_events():
        e = dict(e, pid=pid)
        out.append(e)
    return out


def test_merge_two_ranks(tmp_path, capsys):
    r0 = write(
        tmp_path / "trace.rank0.json",
        chrome_text(rank_events(111), rank=0, world_size=2, base=BASE + 1_000_000_000),
    )
    r1 = write(
        tmp_path / "trace.rank1.json",
        chrome_text(rank_events(222), rank=1, world_size=2, base=BASE),
    )
    out_path = tmp_path / "merged.json"
    rc, out, err = run_main(capsys, "merge", r1, r0, "-o", out_path)
    assert rc == 0 and err == ""
    n_events = 2 * (len(tiny_events()) - 2 + 3)  # per rank: 3 process rows replace its 2
    assert out == f"merged: 2 ranks, {n_events} events -> {out_path}\n"
    merged = json.load(open(out_path))
    assert merged["distributedInfo"] == {"backend": "gloo", "rank": 0, "world_size": 2}
    assert merged["baseTimeNanoseconds"] == BASE
    assert merged["ranks"] == [
        {"rank": 0, "file": r0, "baseTimeNanoseconds": BASE + 1_000_000_000, "complete": True},
        {"rank": 1, "file": r1, "baseTimeNanoseconds": BASE, "complete": True},
    ]
    ev = merged["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in ev if e.get("name") == "process_name"}
    assert names == {(0, "rank 0"), (1, "rank 1")}
    assert {e["pid"] for e in ev} == {0, 1}
    # Rank 0's clock started 1 s later: its times move by 1e6 us, with three decimals kept.
    add0 = [e for e in ev if e.get("name") == "aten::add" and e["pid"] == 0][0]
    add1 = [e for e in ev if e.get("name") == "aten::add" and e["pid"] == 1][0]
    assert add0["ts"] == pytest.approx(1_000_060.0) and add1["ts"] == pytest.approx(60.0)
    assert add0["dur"] == pytest.approx(5.0) and add0["args"]["fqn"] == "Model"
    text = open(out_path).read()
    assert '"ts":1000060.000,"dur":5.000' in text  # the core's compact layout
    assert len(text.splitlines()) == n_events + 2  # header line, one per event, tail line
    flows = {(e["ph"], e["id"], e["pid"]) for e in ev if e["ph"] in "sf"}
    assert len({i for _, i, _ in flows}) == 2 and len(flows) == 4
    assert run_main(capsys, "validate", out_path)[:2] == (0, f"ok: {n_events} events, 4 threads\n")
    # The merged summary adds both ranks.
    s = summarize.summarize(whole_file.load(str(out_path)))
    assert s["modules"]["Model"]["calls"] == 2 and s["step_ms"] == pytest.approx(0.160)


def test_merge_cut_input_and_same_rank(tiny, tmp_path, capsys):
    text = chrome_text(rank_events(222), rank=1, world_size=2)
    cut = write(tmp_path / "r1.json", text[: text.index('"aten::ones_like"')])
    out_path = tmp_path / "m.json"
    rc, out, err = run_main(capsys, "merge", tiny, cut, "-o", out_path)
    assert rc == 0 and "r1.json is cut off" in err and len(err.splitlines()) == 1
    merged = json.load(open(out_path))
    assert merged["fqntrace"]["complete"] is False and merged["fqntrace"]["repaired"] is True
    assert run_main(capsys, "validate", out_path)[0] == 0

    again = write(tmp_path / "again.json", open(tiny).read())
    rc, out, err = run_main(capsys, "merge", tiny, again, "-o", tmp_path / "x.json")
    assert_one_line_error(rc, err, "both rank 0")
    assert not os.path.exists(tmp_path / "x.json")


# ---------------------------------------------------------------------------------------------
# Errors: one line, never a traceback


BAD_INVOCATIONS = [
    ([], "required: VERB"),
    (["frobnicate"], "invalid choice"),
    (["summary", "{tmp}/missing.json"], "missing.json: no such file"),
    (["summary", "{tiny}", "--depth", "x"], "argument --depth: expected a whole number"),
    (["summary", "{tiny}", "--depth", "-1"], "argument --depth: expected a whole number"),
    (["summary", "{tiny}", "--sort", "weird"], "argument --sort: invalid choice"),
    (["summary", "{tiny}", "--phase", "sideways"], "argument --phase: invalid choice"),
    (["summary", "{tmp}/garbage.json"], "not valid JSON"),
    (["summary", "{tmp}/list.json"], "not a trace"),
    (["summary", "{tmp}/bad.summary.json"], "not a summary"),
    (["validate", "{tmp}"], "is a directory"),
    (["validate", "{tmp}/garbage.json"], "not valid JSON"),
    (["repair", "{tmp}/empty.json"], "empty file"),
    (["repair", "{tmp}/garbage.jsonl"], "no valid header"),
    (["merge", "{tiny}"], "the following arguments are required: -o"),
    (["merge", "{tiny}", "-o", "{tmp}/out.jsonl"], "name the output .json"),
    (["merge", "{tiny}", "{tmp}/missing.json", "-o", "{tmp}/out.json"], "no such file"),
    (["summary", "{tmp}/binary.json"], "binary data"),
    (["summary", "{tiny}", "extra"], "extra: no such file"),  # several traces: ranks
]


@pytest.fixture
def junk(tmp_path):
    write(tmp_path / "garbage.json", "this is not json\nat all\n")
    write(tmp_path / "garbage.jsonl", "this is not json\nat all\n")
    write(tmp_path / "list.json", "[1, 2, 3]\n")
    write(tmp_path / "bad.summary.json", '{"step_ms": 1}')
    write(tmp_path / "empty.json", "")
    (tmp_path / "binary.json").write_bytes(b"\x89PNG\x00\x01\x02")
    return tmp_path


@pytest.mark.parametrize(
    "argv, needle", BAD_INVOCATIONS, ids=[" ".join(a) or "none" for a, _ in BAD_INVOCATIONS]
)
def test_bad_invocations_fail_with_one_line(tiny, junk, capsys, argv, needle):
    rc, out, err = run_main(capsys, *[a.format(tmp=junk, tiny=tiny) for a in argv])
    assert out == ""
    assert_one_line_error(rc, err, needle)
    usage = ("required", "the following", "invalid", "argument", "unrecognized")
    assert rc == (2 if needle.startswith(usage) else 1)
    assert not os.path.exists(junk / "out.json")


@pytest.mark.parametrize(
    "argv, needle",
    [
        ([], "required: VERB"),
        (["summary", "{tmp}/missing.json"], "no such file"),
        (["validate", "{tmp}/garbage.json"], "not valid JSON"),
    ],
)
def test_bad_invocations_as_a_command(junk, argv, needle):
    proc = run_cli(*[a.format(tmp=junk) for a in argv])
    assert proc.stdout == ""
    assert_one_line_error(proc.returncode, proc.stderr, needle)


def test_help_works(capsys):
    rc, out, err = run_main(capsys, "summary", "--help")
    assert rc == 0 and "--depth" in out and err == ""


def test_cli_never_imports_torch(tiny):
    code = (
        "import sys; from fqntrace.analysis.cli import main; "
        "rc = main(['summary', sys.argv[1]]); "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'fqntrace._C'))]; "
        "assert not bad, bad; sys.exit(rc)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FQNTRACE", "PYTHONPATH")}
    proc = subprocess.run(
        [sys.executable, "-c", code, tiny], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
