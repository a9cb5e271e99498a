"""FQNTRACE_DEVICE (docs/trace-format.md, *Device events*): device time per module in fqntrace's
own trace. This machine has no GPU, so the path runs with the activities it has: Kineto's CPU
activity (FQNTRACE_DEVICE=cpu) started and stopped per recording — the whole run, each step
window, each capture, around the program's own torch.profiler — and its ops joined to
fqntrace's. The device half runs on the recorded A100 trace (../shared/data/gpu), fed through
the live path's join and written by a live session, against the `annotate` verb. A GPU test runs
where torch sees one and says it was skipped elsewhere."""

import gzip
import json
import os
import re
import textwrap

import pytest
import torch
from conftest import cli_stdout, read_top, run_python
from fqntrace.analysis import device_join, kineto_annotate, summarize
from test_gpu_trace import A100, fqntrace_attribution, host_ranges

LOOP = textwrap.dedent(
    """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def train_step():
        model(torch.randn(16, 32)).sum().backward()
        opt.step()
        opt.zero_grad()
    """
)


def tail(path):
    with open(path) as f:
        return json.load(f)["fqntrace"]


# libkineto's own log lines (`USDT:… SyncActivityProfilerHandler.cpp:52] profiler_start`; a CUDA
# build without a GPU: `ERROR:… DeviceProperties.cpp:56] gpuGetDeviceCount failed`), which torch
# prints for any profiler session.
KINETO_LOG = re.compile(r"^[A-Z]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \w+\.cpp:\d+\] ")


def kineto_noise_free(stderr):
    """stderr less libkineto's own log lines."""
    return [line for line in stderr.splitlines() if not KINETO_LOG.match(line)]


def traced(tmp_path, body, **env):
    path = tmp_path / "run.json"
    proc = run_python(
        LOOP + textwrap.dedent(body), {"FQNTRACE": str(path), **env}, cwd=str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert kineto_noise_free(proc.stderr) == [], proc.stderr
    return path, proc


def cpu_ops(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]


def test_each_window_is_one_kineto_session_whose_ops_all_join(tmp_path):
    # Windows at steps 1-2 and 5-6 of 8: two sessions, every op Kineto saw named by fqntrace.
    path, _ = traced(
        tmp_path,
        "for _ in range(8): train_step()",
        FQNTRACE_DEVICE="cpu",
        FQNTRACE_STEPS="1:3:4",
    )
    collected = tail(path)["device"]["collected"]
    assert collected["recordings"] == 2
    assert collected["events"] == collected["not_attributed"] == 0  # no device here
    assert collected["ops"] == collected["ops_joined"] == len(cpu_ops(path)) > 0
    cli_stdout("validate", path)
    assert "Sequential" in cli_stdout("summary", path)


def test_a_capture_gets_its_own_session_and_the_whole_run_rolls_over(tmp_path):
    path, _ = traced(
        tmp_path,
        """
        import fqntrace
        for i in range(6):
            if i == 1:
                assert fqntrace.capture(steps=2)
            train_step()
        """,
        FQNTRACE_DEVICE="cpu",
        FQNTRACE_STEPS="demand",
    )
    capture = tmp_path / "run.capture-1.json"
    collected = tail(capture)["device"]["collected"]
    assert collected["recordings"] == 1
    assert collected["ops"] == collected["ops_joined"] == len(cpu_ops(capture)) > 0
    cli_stdout("validate", capture)

    # A whole run: one session per ROLL_STEPS steps (and the last, partial one at exit).
    path, _ = traced(tmp_path, "for _ in range(25): train_step()", FQNTRACE_DEVICE="cpu")
    collected = tail(path)["device"]["collected"]
    assert collected["recordings"] == 3  # steps 0-9, 10-19, 20-24
    assert collected["ops"] == collected["ops_joined"] > 0
    assert collected["ops"] == len(cpu_ops(path))


def test_no_gpu_is_one_line_and_a_summary_that_says_so(tmp_path):
    path = tmp_path / "run.json"
    proc = run_python(
        LOOP + "for _ in range(3): train_step()",
        {"FQNTRACE": str(path), "FQNTRACE_DEVICE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = kineto_noise_free(proc.stderr)
    assert lines == [
        "fqntrace: FQNTRACE_DEVICE=1: no GPU in this process (torch.cuda.is_available() is "
        "False); the trace has host time only"
    ]
    assert tail(path)["device"] == {
        "used": False,
        "collected": {
            "recordings": 0, "events": 0, "not_attributed": 0, "ops": 0, "ops_joined": 0,
            "off": "no GPU here",
        },
    }  # fmt: skip
    cli_stdout("validate", path)
    note = "host time only: FQNTRACE_DEVICE collected no device events (no GPU here)"
    assert note in cli_stdout("summary", path)
    summary = json.loads(cli_stdout("summary", "--json", path))
    assert summary["device"]["collected"]["off"] == "no GPU here"

    bad = run_python("import torch", {"FQNTRACE": str(path), "FQNTRACE_DEVICE": "maybe"})
    assert bad.returncode == 0
    assert bad.stderr.splitlines() == [
        "fqntrace: FQNTRACE_DEVICE='maybe' is not a switch value; no device events. Set it to 1 "
        "(device time per module) or 0."
    ]


PROGRAM_PROFILER = """
import json, torch.profiler as tp
for _ in range(2): train_step()
with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
    for _ in range(2): train_step()
rows = sorted((e.key, e.count) for e in prof.key_averages())
for _ in range(2): train_step()
json.dump(rows, open("rows.json", "w"))
"""


def test_the_programs_own_profiler_keeps_its_rows(tmp_path):
    """Kineto serves one profiler: fqntrace's collection pauses for the program's and resumes."""
    rows = {}
    for device in ("0", "cpu"):
        run_dir = tmp_path / device
        run_dir.mkdir()
        path, _ = traced(run_dir, PROGRAM_PROFILER, FQNTRACE_DEVICE=device)
        rows[device] = json.loads((run_dir / "rows.json").read_text())
        if device == "cpu":
            collected = tail(path)["device"]["collected"]
            # before the program's profiler, and after it (resumed, up to the exit)
            assert collected["recordings"] == 2
            assert collected["ops"] == collected["ops_joined"] > 0
            cli_stdout("validate", path)
    assert rows["cpu"] == rows["0"]
    assert any(key == "aten::addmm" for key, _ in rows["cpu"])


def test_a_profiler_already_recording_is_left_alone_and_collection_follows_it(tmp_path):
    body = """
    import json, fqntrace, torch.profiler as tp
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        with fqntrace.profile("inner.json"):
            for _ in range(2): train_step()
    json.dump(len(prof.events()), open("n.json", "w"))
    """
    proc = run_python(
        LOOP + textwrap.dedent(body), {"FQNTRACE_DEVICE": "cpu"}, cwd=str(tmp_path), check_rc=0
    )
    assert kineto_noise_free(proc.stderr) == [], proc.stderr
    # The block's session started inside the program's profiler: fqntrace's collection waited
    # for it (nothing collected, no failure), and the program's profiler recorded as usual.
    collected = tail(tmp_path / "inner.json")["device"]["collected"]
    assert collected["recordings"] == 0 and "off" not in collected
    assert json.loads((tmp_path / "n.json").read_text()) > 0
    cli_stdout("validate", tmp_path / "inner.json")


def test_sessions_one_after_another_each_follow_steps_once(tmp_path):
    """The optimizer hook is one per process: a later session's steps are not counted twice."""
    body = """
    import fqntrace
    for k in range(4):
        with fqntrace.profile(f"s{k}.json"):
            for _ in range(8): train_step()
    """
    proc = run_python(
        LOOP + textwrap.dedent(body), {"FQNTRACE_DEVICE": "cpu"}, cwd=str(tmp_path), check_rc=0
    )
    assert kineto_noise_free(proc.stderr) == [], proc.stderr
    for k in range(4):
        collected = tail(tmp_path / f"s{k}.json")["device"]["collected"]
        assert collected["recordings"] == 1, (k, collected)  # 8 steps < ROLL_STEPS
        assert collected["ops"] == collected["ops_joined"] == len(cpu_ops(tmp_path / f"s{k}.json"))


def _a100_through_the_live_join():
    """The recorded trace as the live collector would hand it over: joined by device_join with
    the attribution fqntrace's drain keeps (played from the trace, as in test_gpu_trace)."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    attribution = fqntrace_attribution(doc["traceEvents"])
    joined = device_join.device_events(doc, attribution)
    return doc, attribution, joined


@pytest.mark.skipif(not os.path.exists(A100), reason=f"the recorded A100 trace is not at {A100}")
def test_recorded_a100_through_the_live_path_gives_annotates_device_time(tmp_path):
    doc, attribution, joined = _a100_through_the_live_join()
    assert len(joined.events) == 3774 and joined.left_out == 0
    assert joined.ops == joined.ops_joined == 14346
    assert {e[4] for e in joined.events} == {0}  # one stream runs one thing at a time: one lane
    # The live session: its device events handed over as the collector does, shifted to now.
    first = min(e[5] for e in joined.events)
    events_file = tmp_path / "events.json"
    events_file.write_text(json.dumps([list(e) for e in joined.events]))
    path = tmp_path / "live.json"
    code = textwrap.dedent(
        f"""
        import json, time, fqntrace
        from fqntrace import _native
        events = json.load(open({str(events_file)!r}))
        with fqntrace.profile({str(path)!r}):
            shift = time.time_ns() + 1_000_000 - {first}
            C = _native.load()
            assert C.device_events(True, 0, [tuple(e[:5]) + (e[5] + shift,) + tuple(e[6:])
                                             for e in events], 0, 14346, 14346)
        """
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert tail(path)["device"]["collected"] == {
        "recordings": 1, "events": 3774, "not_attributed": 0, "ops": 14346, "ops_joined": 14346
    }  # fmt: skip
    cli_stdout("validate", path)

    # The verb on the same recording: fqntrace's ranges with their ids, joined apart.
    ours = tmp_path / "fqntrace.json"
    ours.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "traceEvents": [
                    {**e, "args": {"fqn": attribution[e["args"]["Record function id"]][0],
                                   "phase": attribution[e["args"]["Record function id"]][1],
                                   "Record function id": e["args"]["Record function id"]}}
                    for e in host_ranges(doc["traceEvents"])
                ],
            }
        )
    )  # fmt: skip
    annotated = tmp_path / "annotated.json"
    cli_stdout("annotate", A100, ours, "-o", annotated)

    def device_ms(trace):
        summary = json.loads(cli_stdout("summary", "--json", trace))
        return {
            (fqn, phase): round(m[phase]["self_device_ms"], 6)
            for fqn, m in summary["modules"].items()
            for phase in ("forward", "backward")
            if m.get(phase, {}).get("self_device_ms")
        }

    live, verb = device_ms(path), device_ms(annotated)
    assert live == verb
    total_ms = sum(e["dur"] for e in kineto_annotate_device(doc)) / 1000
    assert sum(live.values()) == pytest.approx(total_ms, rel=1e-6)
    assert len(live) >= 5
    table = cli_stdout("summary", path)
    assert "fwd dev" in table and "host time only" not in table

    # The notebook's table (fqntrace.load): device_ms per module and phase, as summary's.
    import fqntrace

    loaded = {(r["fqn"], r["phase"]): r for r in fqntrace.load(str(path)).summary(frame=False)}
    assert {
        k: round(r["self_device_ms"], 6) for k, r in loaded.items() if r.get("self_device_ms")
    } == live

    # top: a since-start device column per module subtree, from either engine, and on screen.
    summary = json.loads(cli_stdout("summary", "--json", path))
    for native in (True, False):
        rows = top_rows(path, native)
        for fqn in ("Net", "Net.conv", "Net.bn"):
            subtree = sum(
                summary["modules"][fqn][p].get("device_ms", 0) for p in ("forward", "backward")
            )
            assert rows[fqn].device / 1e6 == pytest.approx(subtree, rel=1e-6), (native, fqn)
        roots = sum(r.device for fqn, r in rows.items() if "." not in fqn)  # Net and Global
        assert roots / 1e6 == pytest.approx(total_ms, rel=1e-6)
    pytest.importorskip("rich")
    screen = cli_stdout("top", "--once", path)
    assert "\u03a3dev" in screen and "device time of the kernels" in screen

    # The report's module table: a device-time column per phase, each module's as summary's
    # (headless Chromium; the report needs plotly, the page driver websocket-client).
    pytest.importorskip("plotly")
    pytest.importorskip("websocket")
    from browser import Page

    report = tmp_path / "live.html"
    cli_stdout("report", path, "-o", report)
    with Page() as page:
        page.open(report)
        page.wait_for("document.querySelectorAll('#modules tbody tr').length > 0")
        assert page.errors == []
        heads = page.evaluate(
            "Array.from(document.querySelectorAll('#modules thead th')).map((th) =>"
            " th.textContent.trim())"
        )
        rows = page.evaluate(
            "Array.from(document.querySelectorAll('#modules tbody tr')).map((tr) =>"
            " Array.from(tr.children).map((td) => td.textContent.trim()))"
        )
    assert {"fwd dev ms", "bwd dev ms"} <= set(heads)
    summary = json.loads(cli_stdout("summary", "--json", path))
    column, checked = heads.index("bwd dev ms"), 0
    for row in rows:
        fqn = row[0]
        if fqn in summary["modules"] and "device_ms" in summary["modules"][fqn]["backward"]:
            shown = float(row[column].replace(",", ""))
            expected = summary["modules"][fqn]["backward"]["device_ms"]
            assert shown == pytest.approx(expected, rel=0.01, abs=0.01), fqn
            checked += 1
    assert checked >= 3


def top_rows(path, native):
    """top's rows {fqn: Row} after reading the whole file, by the native engine or Python's."""
    saved = summarize._native
    if not native:
        summarize._native = None
    elif saved is None:
        pytest.skip("the native summary engine is not built")
    try:
        return read_top(path)[1]
    finally:
        summarize._native = saved


def kineto_annotate_device(doc):
    return [
        e for e in doc["traceEvents"]
        if e.get("cat") in kineto_annotate.DEVICE_CATS and e.get("ph") == "X"
    ]  # fmt: skip


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no GPU here (torch.cuda.is_available() is False): the CUDA model's device time is "
    "checked only where torch sees a GPU",
)
def test_cuda_model_every_kernel_named_and_device_time_adds_up(tmp_path):
    path, _ = traced(
        tmp_path,
        """
        model.cuda()
        def train_step():
            model(torch.randn(16, 32, device="cuda")).sum().backward()
            opt.step()
            opt.zero_grad()
        for _ in range(4): train_step()
        """,
        FQNTRACE_DEVICE="1",
    )
    collected = tail(path)["device"]["collected"]
    assert collected["events"] > 0 and collected["not_attributed"] == 0
    with open(path) as f:
        device = [
            e for e in json.load(f)["traceEvents"] if e.get("cat") in kineto_annotate.DEVICE_CATS
        ]
    assert len(device) == collected["events"]
    assert all(e["args"]["fqn"] and e["args"]["phase"] for e in device)
    summary = json.loads(cli_stdout("summary", "--json", path))
    roots = [m for fqn, m in summary["modules"].items() if "." not in fqn]
    by_roots = sum(m[p].get("device_ms", 0) for m in roots for p in ("forward", "backward"))
    assert by_roots == pytest.approx(sum(e["dur"] for e in device) / 1000, rel=1e-6)
    cli_stdout("validate", path)
