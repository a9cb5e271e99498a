"""The device half of the join on a real GPU trace: ../shared/data/gpu/a100_ddp_rank0.json.gz, a
torch.profiler trace recorded on an A100 (rank 0 of 2-rank DDP with NCCL: CPU ops, CUDA runtime
calls, kernels — NCCL's included —, memcpy and memset; the note beside it says where it comes
from). No GPU was available to record one of our own, so fqntrace's side is played from the trace
itself, as fqntrace would have attributed its ranges (by "Record function id"): a forward op takes
the module its kind stands for, what runs inside a range inherits the range's, and an autograd
node takes the module of the forward op with its sequence number (plugin/seq_map.h's rule). Then
the join that runs in a traced process when the profiler exports (kineto_annotate.annotate_events
with the drain's attribution) and the `annotate` verb (attribution read from fqntrace's trace
file) must name every device event as an independent oracle does — the innermost host range
around the device event's runtime launch call, by time on its thread — and give one device time
per module that adds up."""

import collections
import copy
import gzip
import json
import os

import pytest
from conftest import REPO, cli_stdout
from fqntrace.analysis import kineto_annotate

A100 = os.path.join(os.path.dirname(REPO), "shared", "data", "gpu", "a100_ddp_rank0.json.gz")
pytestmark = pytest.mark.skipif(
    not os.path.exists(A100), reason=f"the recorded A100 trace is not at {A100}"
)

HOST = kineto_annotate.HOST_CATS
# Stand-ins for the modules of the recorded model, by the op a top-level forward op is.
MODULE_OF_OP = (("conv", "Net.conv"), ("batch_norm", "Net.bn"), ("relu", "Net.act"))


def module_of(op_name):
    return next((module for key, module in MODULE_OF_OP if key in op_name), "Net")


def host_ranges(events):
    """The cpu_ops and user annotations, by thread and nesting order (outer before inner)."""
    ranges = [e for e in events if e.get("ph") == "X" and e.get("cat") in HOST]
    return sorted(ranges, key=lambda e: (e["tid"], e["ts"], -e["dur"]))


def fqntrace_attribution(events):
    """{Record function id: (fqn, phase, None)}, as fqntrace's drain would give it."""
    ranges = host_ranges(events)
    nodes = [e for e in ranges if "evaluate_function" in e["name"]]
    backward_threads = {e["tid"] for e in nodes}
    attribution, fqn_of_seq, open_ranges = {}, {}, collections.defaultdict(list)
    for e in ranges:
        stack = open_ranges[e["tid"]]
        while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] < e["ts"] + e["dur"]:
            stack.pop()
        inherited = stack[-1][1] if stack else "Global"
        seq = e["args"].get("Sequence number")
        if e["tid"] not in backward_threads:
            phase = "forward"
            fqn = (
                module_of(e["name"])
                if e["cat"] == "cpu_op" and inherited == "Global"
                else inherited
            )
            if seq is not None:
                fqn_of_seq[seq] = fqn  # the last op with the number made the node
        else:
            phase = "backward"
            is_node = "evaluate_function" in e["name"]
            fqn = fqn_of_seq.get(seq, inherited) if is_node else inherited
        attribution[e["args"]["Record function id"]] = (fqn, phase, None)
        stack.append((e, fqn))
    return attribution


def launching_range(events, attribution):
    """The oracle: each device event's (fqn, phase) from the innermost host range around its
    runtime launch call (same thread, by time), found without the External ids."""
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in kineto_annotate.RUNTIME_CATS and "correlation" in e.get("args", {})
    }
    by_thread = collections.defaultdict(list)
    for e in host_ranges(events):
        by_thread[e["tid"]].append(e)
    out = []
    for device in device_events(events):
        call = runtime[device["args"]["correlation"]]
        around = [
            h
            for h in by_thread[call["tid"]]
            if h["ts"] <= call["ts"] and call["ts"] + call["dur"] <= h["ts"] + h["dur"]
        ]
        inner = max(around, key=lambda h: (h["ts"], -h["dur"]))
        out.append(attribution[inner["args"]["Record function id"]][:2])
    return out


def device_events(events):
    return [e for e in events if e.get("cat") in kineto_annotate.DEVICE_CATS and e["ph"] == "X"]


@pytest.fixture(scope="module")
def recorded():
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    return doc, fqntrace_attribution(doc["traceEvents"])


def test_every_device_event_gets_the_module_of_the_op_that_launched_it(recorded):
    doc, attribution = recorded
    events = copy.deepcopy(doc["traceEvents"])
    counts = kineto_annotate.annotate_events(events, attribution)
    assert counts.device == 3774  # 2,700 kernels, 960 copies, 114 fills
    assert counts.device_annotated == counts.device
    assert counts.cpu_ops_annotated == counts.cpu_ops == 14346
    named = [(e["args"]["fqn"], e["args"]["phase"]) for e in device_events(events)]
    assert named == launching_range(events, attribution)
    # Both phases and several modules get device time: the join is not one constant.
    assert {phase for _, phase in named} == {"forward", "backward"}
    assert len({fqn for fqn, _ in named}) >= 5


def test_the_live_join_and_the_annotate_verb_give_one_device_time_per_module(recorded, tmp_path):
    doc, attribution = recorded
    # The live path: the profiler's export annotated in the traced process.
    live = copy.deepcopy(doc)
    kineto_annotate.annotate_events(live["traceEvents"], attribution)
    live_path = tmp_path / "live.json"
    kineto_annotate.write_kineto(str(live_path), live)
    # The verb: fqntrace's own trace of the run on disk (its ranges with the ids), joined apart.
    ours = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": [
            {
                "ph": "X",
                "cat": e["cat"],
                "name": e["name"],
                "pid": e["pid"],
                "tid": e["tid"],
                "ts": e["ts"],
                "dur": e["dur"],
                "args": {
                    "fqn": attribution[e["args"]["Record function id"]][0],
                    "phase": attribution[e["args"]["Record function id"]][1],
                    "Record function id": e["args"]["Record function id"],
                },
            }
            for e in host_ranges(doc["traceEvents"])
        ],
        "fqntrace": {"complete": True},
    }
    ours_path = tmp_path / "fqntrace.json"
    ours_path.write_text(json.dumps(ours))
    verb_path = tmp_path / "annotated.json"
    out = cli_stdout("annotate", A100, str(ours_path), "-o", str(verb_path))
    assert "device events 3774/3774 (100.0 %)" in out

    summaries = [
        json.loads(cli_stdout("summary", "--json", str(p))) for p in (live_path, verb_path)
    ]
    device = [
        {
            (fqn, phase): m[phase].get("self_device_ms")
            for fqn, m in s["modules"].items()
            for phase in ("forward", "backward", "recompute")
        }
        for s in summaries
    ]
    assert device[0] == device[1]
    total_ms = sum(e["dur"] for e in device_events(doc["traceEvents"])) / 1000
    assert sum(v or 0 for v in device[0].values()) == pytest.approx(total_ms, rel=1e-6)
    roots = [m for fqn, m in summaries[0]["modules"].items() if "." not in fqn]
    by_roots = sum(m[p].get("device_ms", 0) for m in roots for p in ("forward", "backward"))
    assert by_roots == pytest.approx(total_ms, rel=1e-6)
