"""`merge`'s native rewrite (fqntrace.analysis._native_merge) writes byte for byte the merged
trace the Python loop writes: on real traces of the demo (two ranks with different clock bases,
Chrome and JSON Lines, gzip, memory events, flows), with lines it must leave to the Python loop
(unusual numbers, escapes, spaces, a repeated key: the rest of that input is read in Python) and
with a cut-off input."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from fqntrace.analysis import merge, tracestream

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bigtrace  # noqa: E402

pytestmark = pytest.mark.skipif(
    merge._native is None, reason="the native merge is not built (libsimdjson-dev)"
)

SHIFT_NS = 1_500_000_123  # rank 1's clock starts this much earlier


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The demo traced once (Chrome + JSON Lines, memory events); rank 1 is the same run
    relabelled, its clock base moved."""
    folder = tmp_path_factory.mktemp("merge_native")
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env.update(
        {
            "FQNTRACE": str(folder / "r0.json"),
            "FQNTRACE_FORMATS": "chrome,jsonl",
            "FQNTRACE_MEMORY": "1",
        }
    )
    subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", "3", "--layers", "1"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    for ext in ("json", "jsonl"):
        text = (folder / f"r0.{ext}").read_text()
        with tracestream.TraceStream(str(folder / f"r0.{ext}")) as stream:
            base = stream.header["baseTimeNanoseconds"]
        other = text.replace('"rank": 0', '"rank": 1', 1).replace(
            f'"baseTimeNanoseconds": {base}', f'"baseTimeNanoseconds": {base - SHIFT_NS}', 1
        )
        (folder / f"r1.{ext}").write_text(other)
    (folder / "r1.jsonl.gz").write_bytes(gzip.compress((folder / "r1.jsonl").read_bytes()))
    return folder


class CountingMerger:
    """The native Merger, counting the blocks it rewrote and refused."""

    NATIVE = merge._native

    def __init__(self):
        self.merger = self.NATIVE.Merger()
        self.blocks = {"rewritten": 0, "refused": 0}
        CountingMerger.last = self

    def rewrite_block(self, *block):
        done = self.merger.rewrite_block(*block)
        self.blocks["refused" if done is None else "rewritten"] += 1
        return done

    def __getattr__(self, name):
        return getattr(self.merger, name)


def merged(monkeypatch, tmp_path, inputs, native):
    """The merged file's bytes, by the native rewrite or by the Python loop alone."""
    monkeypatch.setattr(
        merge, "_native", type("Native", (), {"Merger": CountingMerger}) if native else None
    )
    out = tmp_path / ("native.json" if native else "python.json")
    notes = []
    merge.merge_traces([str(p) for p in inputs], str(out), notes.append)
    return out.read_bytes(), notes


def both(monkeypatch, tmp_path, inputs, refused=0):
    """The merged trace (parsed), the same from both paths; `refused`: the blocks the native
    rewrite leaves to the Python loop."""
    fast, fast_notes = merged(monkeypatch, tmp_path, inputs, True)
    blocks = CountingMerger.last.blocks
    assert blocks["rewritten"] >= len(inputs) - refused and blocks["refused"] == refused
    slow, slow_notes = merged(monkeypatch, tmp_path, inputs, False)
    assert fast_notes == slow_notes
    assert fast == slow
    return json.loads(fast)


def check_merged(trace, n_ranks):
    """What a merged trace says when parsed back: one process row per rank, times on the
    earliest base, flows whose two ends share an id no other flow has."""
    events = trace["traceEvents"]
    assert {e["pid"] for e in events} == set(range(n_ranks))
    rows = [e for e in events if e.get("name") == "process_name"]
    assert [(e["pid"], e["args"]["name"]) for e in rows] == [
        (r, f"rank {r}") for r in range(n_ranks)
    ]
    ends = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            ends.setdefault(e["id"], []).append((e["ph"], e["pid"]))
    assert ends and all(
        sorted(p for p, _ in v) == ["f", "s"] and len({pid for _, pid in v}) == 1
        for v in ends.values()
    )
    assert trace["fqntrace"]["events"] == sum(e["ph"] == "X" for e in events)
    return events


def test_two_ranks_chrome_same_bytes_as_python(ranks, tmp_path, monkeypatch):
    trace = both(monkeypatch, tmp_path, [ranks / "r0.json", ranks / "r1.json"])
    events = check_merged(trace, 2)
    assert trace["baseTimeNanoseconds"] == trace["ranks"][1]["baseTimeNanoseconds"]
    # rank 0's ops moved by the clock difference, to the nanosecond
    first = {}
    for e in events:
        if e["ph"] == "X":
            first.setdefault(e["pid"], e)
    assert round((first[0]["ts"] - first[1]["ts"]) * 1000) == SHIFT_NS
    assert any(e.get("name") == "[memory]" for e in events)


def test_json_lines_and_gzip_inputs_same_bytes(ranks, tmp_path, monkeypatch):
    check_merged(both(monkeypatch, tmp_path, [ranks / "r0.jsonl", ranks / "r1.jsonl.gz"]), 2)


def test_lines_left_to_python_and_cut_input_same_bytes(ranks, tmp_path, monkeypatch):
    # rank 1 made longer (several read chunks): the odd lines in the middle send the second half
    # to the Python loop, which goes on with the flows the native rewrite opened
    bigtrace.make(str(ranks / "r1.json"), str(tmp_path / "long.json"), 10, rank=1)
    lines = (tmp_path / "long.json").read_text().split("\n")
    middle = len(lines) // 2
    odd = [
        '{"ph":"i","name":"odd","pid":1,"tid":1,"ts":5,"args":{"x":1e-7}},',
        '{"ph":"i","name":"odd\\u007f","pid":1,"tid":1,"ts":5.5},',
        '{"ph":"i","name":"odd","pid":1,"tid":1,"tid":2,"ts":6},',
        '{"ph":"i", "name":"odd","tid":1,"ts":7.25,"args":{"big":123456789012345678901234}},',
    ]
    (tmp_path / "odd.json").write_text("\n".join(lines[:middle] + odd + lines[middle:]))
    trace = both(monkeypatch, tmp_path, [ranks / "r0.json", tmp_path / "odd.json"], refused=1)
    assert CountingMerger.last.blocks["rewritten"] >= 2  # r0, and odd.json's first chunk
    check_merged(trace, 2)
    text = (ranks / "r1.json").read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) * 2 // 3])  # the cut line: the reader's
    trace = both(monkeypatch, tmp_path, [ranks / "r0.json", tmp_path / "cut.json"])
    assert trace["fqntrace"]["complete"] is False and trace["fqntrace"]["repaired"] is True


@pytest.mark.parametrize(
    "line, native",
    [
        (
            b'{"ph":"X","name":"a","pid":7,"tid":7,"ts":1.5,"dur":2,"args":{"x":0.25,"s":"q\\"\\n"}}',
            True,
        ),
        (b'{"ph":"i","name":"a","pid":7,"ts":1,"args":{"x":1e-7}}', False),  # msgspec: 1e-7
        (b'{"ph":"i","name":"a","pid":7,"ts":1,"args":{"x":1.50}}', False),  # msgspec: 1.5
        (b'{"ph":"i","name":"a","pid":7,"ts":1,"args":{"x":-0}}', False),
        (b'{"ph":"i","name":"a\\u007f","pid":7,"ts":1}', False),  # msgspec writes DEL as it is
        (b'{"ph":"i","name":"a\\/b","pid":7,"ts":1}', False),
        (b'{"ph":"i","name":"a","pid":7,"pid":8,"ts":1}', False),  # a repeated key
        (b'{"ph":"i","name":"a","pid":7,"ts":1,"args":{"k":1,"k":2}}', False),
        (b'{"ph":"i", "name":"a","pid":7,"ts":1}', False),  # not compact
        (b'{"ph":"M","name":"process_name","pid":7,"tid":0, "args":{"name":"python"}}', True),
        (b'{"ph":"i","name":"a","pid":7,"ts":1} {"ph":"i"}', False),  # two events on a line
        (b'{"ph":"i","name":"a","pid":7,"ts":1,', False),  # a cut line
        # more than 19 digits: simdjson 3.x reads 1.00000000000000000001 as 0
        (b'{"ph":"i","name":"a","pid":7,"ts":1.00000000000000000001}', False),
        (
            b'{"ph":"i","name":"a","pid":7,"ts":1,"args":{"x":0.1000000000000000000000000001}}',
            False,
        ),
    ],
)
def test_which_lines_the_native_rewrite_takes(line, native):
    merger = merge._native.Merger()
    merger.start_rank(3, 1000, False)
    block = line + b",\n" + b'{"ph":"i","name":"b","pid":7,"ts":2}'
    done = merger.rewrite_block(block, 0, len(block))
    assert (done is not None) == native
    if done is not None:
        python = [
            merge._rewrite(e, 3, 1000, merge._Flows(), {"slices": 0})
            for e in json.loads(b"[" + block + b"]")
        ]
        text = "".join(",\n" + merge._encode_event(e) for e in python if e is not None)
        assert done[0].decode() == text
