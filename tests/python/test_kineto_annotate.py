"""torch.profiler's traces carry fqntrace's fqn and phase (docs/trace-format.md, *torch.profiler
traces*): a traced program's own exports (export_chrome_trace, tensorboard_trace_handler, a
.json.gz on_trace_ready) are annotated as written, op for op as fqntrace's trace says (joined on
"Record function id"); `annotate` does the same for a trace exported apart; summary reads them.
The device half (kernels, copies, fills through "External id" / correlation) runs on a
hand-made fragment in Kineto's format: no GPU here."""

import gzip
import json
import os
import subprocess
import sys

from conftest import run_python
from fqntrace.analysis import kineto_annotate, summarize, table

PROGRAM = r"""
import sys, torch
import torch.profiler as tp
from torch.utils.checkpoint import checkpoint
out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 8)
    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(8, 1)
    def forward(self, x):
        x = self.blocks[0](x)
        x = checkpoint(self.blocks[1], x, use_reentrant=False)
        return self.head(x)

net = Net()
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
def step():
    opt.zero_grad()
    net(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()

step()
with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
    step()
    step()
prof.export_chrome_trace(out + "/direct.json")
with tp.profile(activities=[tp.ProfilerActivity.CPU]) as apart:
    step()
apart.profiler.kineto_results.save(out + "/raw.json")  # as torch writes it: for `annotate`
with tp.profile(activities=[tp.ProfilerActivity.CPU],
                schedule=tp.schedule(wait=1, warmup=1, active=1, repeat=1),
                on_trace_ready=tp.tensorboard_trace_handler(out + "/tb")) as p:
    for _ in range(4):
        step()
        p.step()
with tp.profile(activities=[tp.ProfilerActivity.CPU],
                on_trace_ready=lambda p: p.export_chrome_trace(out + "/ready.json.gz")):
    step()
"""


def done_diff_stdout(tmp_path, tb):
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", "diff", str(tmp_path / "direct.json"), tb, "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _cpu_ops(doc):
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def _ours_by_rf(path):
    ours = {}
    for e in json.loads(open(path).read())["traceEvents"]:
        rf = e.get("args", {}).get("Record function id") if e.get("ph") == "X" else None
        if rf:
            ours[rf] = e
    return ours


def _check_agrees(doc, ours):
    """≥ 99 % of the cpu_ops annotated, each exactly as fqntrace's own event of that range."""
    ops = _cpu_ops(doc)
    assert len(ops) > 100
    annotated = [e for e in ops if "fqn" in e["args"]]
    assert len(annotated) >= 0.99 * len(ops), (len(annotated), len(ops))
    for e in annotated:
        mine = ours[e["args"]["Record function id"]]
        assert mine["name"] == e["name"]
        assert (mine["args"]["fqn"], mine["args"]["phase"]) == (
            e["args"]["fqn"],
            e["args"]["phase"],
        )
    return annotated


def test_traced_program_exports_annotated_traces(tmp_path):
    fq = tmp_path / "fq.json"
    proc = run_python(PROGRAM.replace("sys.argv[1]", repr(str(tmp_path))), {"FQNTRACE": str(fq)})
    assert proc.returncode == 0, proc.stderr
    assert "fqntrace" not in proc.stderr, proc.stderr
    ours = _ours_by_rf(fq)
    assert ours, "fqntrace's trace has no Record function id"

    direct = json.loads((tmp_path / "direct.json").read_text())
    annotated = _check_agrees(direct, ours)
    phases = {(e["args"]["fqn"], e["args"]["phase"]) for e in annotated}
    assert ("Net.blocks.0.fc1", "forward") in phases
    assert ("Net.blocks.0.fc1", "backward") in phases
    assert ("Net.blocks.1.fc2", "recompute") in phases
    # fqntrace's module scopes stay out of the profiler's own trace (docs/compatibility.md; they
    # are there with FQNTRACE_MODULE_RANGES=1).
    assert not [e for e in direct["traceEvents"] if str(e.get("name")).startswith("nn.Module: ")]

    tb_files = os.listdir(tmp_path / "tb")
    assert len(tb_files) == 1
    _check_agrees(json.loads((tmp_path / "tb" / tb_files[0]).read_text()), ours)
    with gzip.open(tmp_path / "ready.json.gz", "rt") as f:
        _check_agrees(json.load(f), ours)

    # The trace written apart (raw Kineto) has no fqn; `annotate` gives it the same ones.
    raw = json.loads((tmp_path / "raw.json").read_text())
    assert not any("fqn" in e["args"] for e in _cpu_ops(raw))
    out = tmp_path / "annotated.json"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "fqntrace",
            "annotate",
            str(tmp_path / "raw.json"),
            str(fq),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "annotated: cpu_ops" in cli.stdout
    _check_agrees(json.loads(out.read_text()), ours)

    # summary reads the annotated profiler trace: per module op time per phase.
    s = summarize.load_for_summary(str(tmp_path / "direct.json"))
    fc1 = s["modules"]["Net.blocks.0.fc1"]
    assert fc1["forward"]["ops"] > 0 and fc1["backward"]["ops"] > 0
    assert s["modules"]["Net.blocks.1"]["recompute"]["self_ms"] >= 0
    assert "device_ms" not in fc1["forward"]  # a CPU-only trace: no device columns
    # report and diff read them too (through the same summary).
    tb = str(tmp_path / "tb" / tb_files[0])
    for verb in (
        ["diff", str(tmp_path / "direct.json"), tb, "--json"],
        ["report", str(tmp_path / "direct.json"), "-o", str(tmp_path / "r.html")],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "fqntrace", *verb], capture_output=True, text=True
        )
        assert done.returncode == 0, (verb, done.stderr)
    rows = {r["fqn"] for r in json.loads(done_diff_stdout(tmp_path, tb))["rows"]}
    assert "Net.blocks.0.fc1" in rows
    assert "Net.blocks.0.fc1" in (tmp_path / "r.html").read_text()


# -- the device half: a hand-made fragment in Kineto's format --------------------------------
# Two ops on the host (forward addmm, backward mm inside its node), each launching work through
# cudaLaunchKernel / cudaMemcpyAsync / cudaMemsetAsync; the device events carry the op's
# "External id" and the runtime call's "correlation", as libkineto writes them (one kernel
# without "External id": found through its correlation), plus the ac2g flow pair.
def _fragment():
    def op(name, ext, rf, ts, dur, tid=100):
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 7,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "args": {"External id": ext, "Record function id": rf, "Ev Idx": ext},
        }

    def runtime(name, ext, corr, ts):
        return {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": name,
            "pid": 7,
            "tid": 100,
            "ts": ts,
            "dur": 4,
            "args": {"External id": ext, "cbid": 211, "correlation": corr},
        }

    def device(cat, name, ext, corr, ts, dur):
        args = {"device": 0, "stream": 7, "correlation": corr, "context": 1}
        if ext is not None:
            args["External id"] = ext
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "args": args,
        }

    events = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        op("aten::addmm", 11, 501, 100, 50),
        runtime("cudaLaunchKernel", 11, 9001, 110),
        runtime("cudaMemsetAsync", 11, 9002, 120),
        op("autograd::engine::evaluate_function: AddmmBackward0", 12, 502, 300, 80),
        op("aten::mm", 13, 503, 310, 40),
        runtime("cudaLaunchKernel", 13, 9003, 320),
        runtime("cudaMemcpyAsync", 13, 9004, 330),
        op("aten::copy_", 14, 999, 400, 10),  # a range fqntrace never saw
        runtime("cudaLaunchKernel", 14, 9005, 405),
        device("kernel", "volta_sgemm_128x64_nn", 11, 9001, 200, 30),
        device("gpu_memset", "Memset (Device)", 11, 9002, 235, 2),
        device("kernel", "volta_sgemm_64x64_tn", None, 9003, 500, 60),
        device("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 13, 9004, 565, 5),
        device("kernel", "elementwise_kernel", 14, 9005, 600, 3),
        {"ph": "s", "id": 9001, "pid": 7, "tid": 100, "ts": 110, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 9001,
            "pid": 0,
            "tid": 7,
            "ts": 200,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "A100"}],
        "traceEvents": events,
        "traceName": "fragment",
    }


ATTRIBUTION = {
    501: ("Net.fc", "forward", None),
    502: ("Net.fc", "backward", None),
    503: ("Net.fc", "backward", None),
}


def test_device_events_get_the_fqn_of_the_op_that_launched_them():
    doc = _fragment()
    counts = kineto_annotate.annotate_events(doc["traceEvents"], ATTRIBUTION)
    assert (counts.cpu_ops, counts.cpu_ops_annotated) == (4, 3)
    assert (counts.device, counts.device_annotated) == (5, 4)
    owner = {
        e["name"] + "@" + str(e["ts"]): (e["args"].get("fqn"), e["args"].get("phase"))
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
    }
    assert owner["volta_sgemm_128x64_nn@200"] == ("Net.fc", "forward")
    assert owner["Memset (Device)@235"] == ("Net.fc", "forward")
    assert owner["volta_sgemm_64x64_tn@500"] == ("Net.fc", "backward")  # by correlation
    assert owner["Memcpy DtoD (Device -> Device)@565"] == ("Net.fc", "backward")
    assert owner["elementwise_kernel@600"] == (None, None)
    assert owner["cudaLaunchKernel@110"] == ("Net.fc", "forward")


def test_summary_shows_device_time_per_phase(tmp_path):
    doc = _fragment()
    kineto_annotate.annotate_events(doc["traceEvents"], ATTRIBUTION)
    path = tmp_path / "kineto.json"
    path.write_text(json.dumps(doc))
    s = summarize.load_for_summary(str(path))
    fc = s["modules"]["Net.fc"]
    assert fc["forward"]["device_ms"] == 0.032
    assert fc["backward"]["device_ms"] == 0.065
    assert s["modules"]["Net"]["backward"]["device_ms"] == 0.065  # a parent's total
    lines = table.render_table(s)
    header = next(line for line in lines if line.startswith("module"))
    assert "fwd dev" in header and "bwd dev" in header
    # diff carries the device time of both sides.
    from fqntrace.analysis import diff

    row = next(r for r in diff.compare(s, s)["rows"] if r["fqn"] == "Net.fc")
    assert row["new"]["backward"]["device_ms"] == 0.065


def test_annotate_verb_on_the_fragment(tmp_path):
    kineto = tmp_path / "kineto.json"
    kineto.write_text(json.dumps(_fragment()))
    ours = tmp_path / "fq.json"  # fqntrace's layout: header line, one event per line, tail
    lines = [
        json.dumps(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::addmm",
                "pid": 7,
                "tid": 100,
                "ts": 1.0,
                "dur": 2.0,
                "args": {"fqn": f, "phase": p, "Record function id": rf, "depth": 0},
            }
        )
        for rf, (f, p, _) in ATTRIBUTION.items()
    ]
    ours.write_text(
        '{"schemaVersion": 1, "traceEvents": [\n'
        + ",\n".join(lines)
        + '\n], "fqntrace": {"complete": true}}\n'
    )
    out = tmp_path / "out.json.gz"
    cli = subprocess.run(
        [sys.executable, "-m", "fqntrace", "annotate", str(kineto), str(ours), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "cpu_ops 3/4" in cli.stdout and "device events 4/5" in cli.stdout
    with gzip.open(out, "rt") as f:
        kernels = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert [e["args"].get("fqn") for e in kernels] == ["Net.fc", "Net.fc", None]


def test_annotate_bad_inputs_say_what_to_do(tmp_path):
    kineto = tmp_path / "kineto.json"
    kineto.write_text(json.dumps(_fragment()))
    plain = tmp_path / "plain.json"  # an fqntrace trace made without torch.profiler: no ids
    plain.write_text(
        '{"schemaVersion": 1, "traceEvents": [\n'
        + json.dumps(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add",
                "pid": 1,
                "tid": 1,
                "ts": 1.0,
                "dur": 1.0,
                "args": {"fqn": "Global", "phase": "forward", "depth": 0},
            }
        )
        + '\n], "fqntrace": {"complete": true}}\n'
    )
    for args, expected in (
        (["missing.json", str(plain)], "no such file"),
        ([str(kineto), str(plain)], "Record function id"),
        ([str(plain), str(tmp_path)], "directory"),
    ):
        cli = subprocess.run(
            [sys.executable, "-m", "fqntrace", "annotate", *args, "-o", str(tmp_path / "o.json")],
            capture_output=True,
            text=True,
        )
        assert cli.returncode == 1, cli
        assert len(cli.stderr.strip().splitlines()) == 1 and expected in cli.stderr, cli.stderr
