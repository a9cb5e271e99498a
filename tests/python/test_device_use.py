"""Whether the traced process used a GPU reaches the trace's tail (python/fqntrace/_device.py,
plugin/device_use.h), and a GPU job's trace without device events says its times are the host's:
in `summary` (table and --json), the cross-rank summary, `merge`, `report` and the notebook view.
This machine has no GPU: torch's lazy CUDA initialization is played by calling the call fqntrace
queued with it, as torch's own _lazy_init does, with torch.cuda.device_count() answering 2."""

import json
import os

import fqntrace
import pytest
from conftest import cli_stdout, run_python
from fqntrace.analysis import trace_events

PROGRAM = """
import sys, torch, fqntrace
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
for _ in range(3):
    model(torch.randn(4, 8)).sum().backward()
queued = [call for call, _ in torch.cuda._queued_calls if "watch_device_use" in call.__qualname__]
assert len(queued) == 1, torch.cuda._queued_calls  # queued once, never run on the CPU build
if sys.argv[1:] == ["gpu"]:
    torch.cuda.device_count = lambda: 2
    queued[0]()  # what torch.cuda._lazy_init does with its queued calls
"""

HOST_NOTE = "host time only: the process used CUDA (2 devices) but the trace has no device events"


def traced(path, *argv, env=None):
    """Runs PROGRAM traced into `path`; checks that the trace validates."""
    code = f"import sys; sys.argv = ['prog', *{list(argv)!r}]\n" + PROGRAM
    run_python(code, env_extra={"FQNTRACE": str(path), **(env or {})}, check_rc=0)
    assert cli_stdout("validate", str(path)).startswith("ok: ")  # exit 0 too
    return path


def tail_of(path):
    with open(path) as f:
        text = f.read()
    if str(path).endswith(".jsonl"):
        return json.loads(text.strip().splitlines()[-1])
    return json.loads(text)["fqntrace"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("device")
    return {
        "cpu": traced(folder / "cpu.json"),
        "gpu": traced(folder / "gpu.json", "gpu"),
        "gpu_lines": traced(folder / "gpu.jsonl", "gpu"),
    }


def test_a_cpu_run_says_no_device_was_used_and_shows_no_note(traces):
    assert tail_of(traces["cpu"])["device"] == {"used": False}
    summary = json.loads(cli_stdout("summary", "--json", str(traces["cpu"])))
    assert summary["device"] == {"used": False, "device_events": False}
    assert "host time only" not in cli_stdout("summary", str(traces["cpu"]))


def test_a_gpu_run_without_device_events_says_its_times_are_the_hosts(traces):
    for key in ("gpu", "gpu_lines"):
        assert tail_of(traces[key])["device"] == {"used": True, "type": "cuda", "count": 2}
        summary = json.loads(cli_stdout("summary", "--json", str(traces[key])))
        assert summary["device"] == {
            "used": True,
            "type": "cuda",
            "count": 2,
            "device_events": False,
        }
        table = cli_stdout("summary", str(traces[key]))
        assert HOST_NOTE in table
        assert "trace with FQNTRACE_DEVICE=1" in table
    # The notebook's text and HTML views are the CLI's table.
    trace = fqntrace.load(str(traces["gpu"]))
    assert HOST_NOTE in trace.table()
    assert HOST_NOTE in trace._repr_html_()


def test_device_events_in_the_trace_silence_the_note(traces, tmp_path):
    # A kernel with its launching op's fqn, as a device-time trace carries them.
    with open(traces["gpu_lines"]) as f:
        lines = f.read().strip().splitlines()
    op = next(
        json.loads(line)
        for line in lines
        if '"cat":"cpu_op"' in line and json.loads(line)["args"]["fqn"] != "Global"
    )
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": "gemm_kernel",
        "pid": op["pid"],
        "tid": 7,
        "ts": op["ts"],
        "dur": 3.5,
        "args": {"fqn": op["args"]["fqn"], "phase": op["args"]["phase"], "stream": 7},
    }
    path = tmp_path / "with_kernels.jsonl"
    path.write_text("\n".join(lines[:-1] + [json.dumps(kernel), lines[-1]]) + "\n")
    summary = json.loads(cli_stdout("summary", "--json", str(path)))
    assert summary["device"]["device_events"] is True
    phase = summary["modules"][op["args"]["fqn"]][op["args"]["phase"]]
    assert phase["device_ms"] == pytest.approx(0.0035)
    assert "host time only" not in cli_stdout("summary", str(path))


def test_a_trace_that_does_not_say_keeps_its_summary(traces, tmp_path):
    # Traces written before fqntrace watched (or by a C++ program): no "device" anywhere.
    with open(traces["gpu"]) as f:
        trace = json.load(f)
    del trace["fqntrace"]["device"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(trace))
    assert trace_events.device_use(trace["fqntrace"]) is None
    assert "device" not in json.loads(cli_stdout("summary", "--json", str(path)))


def test_merge_cross_rank_and_report_carry_it(traces, tmp_path):
    code = "import sys; sys.argv = ['prog', 'gpu']\n" + PROGRAM
    for rank in (0, 1):
        env = {"FQNTRACE": str(tmp_path / "run.json"), "RANK": str(rank), "WORLD_SIZE": "2"}
        run_python(code, env_extra=env, check_rc=0)
    ranks = sorted(str(p) for p in tmp_path.glob("run*.json"))  # a file per rank
    assert len(ranks) == 2, ranks
    merged = tmp_path / "merged.json"
    cli_stdout("merge", *ranks, "-o", str(merged))
    assert tail_of(merged)["device"] == {"used": True, "type": "cuda", "count": 2}
    across = json.loads(cli_stdout("summary", "--json", *ranks))
    assert set(across["device"]) == {"0", "1"}
    assert HOST_NOTE in cli_stdout("summary", *ranks)
    page = tmp_path / "report.html"
    cli_stdout("report", str(traces["gpu"]), "-o", str(page))
    assert HOST_NOTE in page.read_text()
    cpu_page = tmp_path / "cpu.html"
    cli_stdout("report", str(traces["cpu"]), "-o", str(cpu_page))
    assert "host time only" not in cpu_page.read_text()
    assert os.path.getsize(cpu_page) > 0


def test_the_device_type_read_from_a_trace_is_shown_escaped():
    from fqntrace.analysis import table

    device = {"used": True, "type": "\x1b[2Jcuda", "count": 1, "device_events": False}
    notes = table.host_time_notes({"device": device})
    assert notes and "\x1b" not in "".join(notes)
    assert "(1 device)" in notes[0]
