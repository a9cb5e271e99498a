"""The Chrome trace loads in HolisticTraceAnalysis, which builds its call graph from it."""

import subprocess
import sys

import pytest


def test_trace_loads_in_holistic_trace_analysis(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    from hta.common.call_stack import CallGraph

    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    env = {"FQNTRACE": str(trace_dir / "rank0.json"), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", "2", "--layers", "1"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The trace has ProfilerStep ranges (one per optimizer step): HTA leaves out the last step's
    # events unless told, as it does for Kineto's traces.
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir), include_last_profiler_step=True)
    assert analysis.t.get_ranks() == [0]
    frame = analysis.t.get_trace(0)
    names = set(analysis.t.symbol_table.get_sym_table()[i] for i in frame["name"].unique())
    assert "aten::addmm" in names and "AddmmBackward0" in names
    assert "nn.Module: TinyTransformer.layers.0.attn" in names
    graph = CallGraph(analysis.t, ranks=[0])
    assert len(graph.call_stacks) >= 1
    # HTA rebuilt the nesting: an aten::addmm of the attention's projection sits below the
    # module span of that attention in the main thread's call stack.
    sym = analysis.t.symbol_table.get_sym_id_map()
    span_rows = set(frame.index[frame["name"] == sym["nn.Module: TinyTransformer.layers.0.attn"]])
    addmm_rows = frame.index[frame["name"] == sym["aten::addmm"]]
    nested = 0
    for stack in graph.call_stacks:
        for row in addmm_rows:
            if row in stack.get_nodes() and span_rows & set(stack.get_path_to_root(row)):
                nested += 1
    assert nested >= 2  # qkv and proj of layer 0, in each of two steps
