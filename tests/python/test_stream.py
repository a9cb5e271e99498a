"""`summary` reads a trace as a stream (tracestream.py + summarize.summarize_stream): the
same numbers as the whole-file reader for every layout (the core's lines, JSON Lines, gzip,
pretty-printed, cut off, out of order), and peak memory that does not grow with the file."""

import gzip
import json
import os
import random
import subprocess
import sys

import pytest
from fqntrace.analysis import errors, summarize, trace_bytes, trace_events, tracestream, whole_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bigtrace  # noqa: E402

TRAIN = """
import torch
from torch.utils.checkpoint import checkpoint
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()) for _ in range(2))
        self.head = torch.nn.Linear(32, 1)
    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)
n = Net()
opt = torch.optim.SGD(n.parameters(), lr=0.1)
for _ in range(3):
    with torch.autograd.profiler.record_function("step"):
        n(torch.randn(16, 32, requires_grad=True)).sum().backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A real trace of a checkpointed model, in both formats."""
    from conftest import run_python

    folder = tmp_path_factory.mktemp("stream")
    path = folder / "t.json"
    run_python(TRAIN, {"FQNTRACE": str(path), "FQNTRACE_FORMATS": "jsonl"}, check_rc=0)
    return str(path), str(folder / "t.jsonl")


def whole(path):
    return summarize.summarize(whole_file.load(path))


def streamed(path):
    notes = []
    return summarize.summarize_stream(path, notes.append), notes


def test_streamed_summary_equals_whole_file_summary_in_every_layout(traced, tmp_path, monkeypatch):
    chrome, jsonl = traced
    expected = whole(chrome)
    assert expected["modules"]["Net.blocks.0.0"]["recompute"]["self_ms"] > 0
    assert streamed(chrome) == (expected, [])
    assert streamed(jsonl)[0] == whole(jsonl)
    # gzip, decompressed as it is read
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(open(chrome, "rb").read()))
    assert streamed(str(gz))[0] == expected
    # another layout (pretty-printed), read in chunks far smaller than an event
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.load(open(chrome)), indent=2))
    monkeypatch.setattr(trace_bytes, "CHUNK_BYTES", 97)
    assert streamed(str(pretty))[0] == expected
    assert streamed(str(gz))[0] == expected
    # the core's layout in small chunks: each chunk starts with the line the last one cut
    assert streamed(chrome)[0] == expected
    assert streamed(jsonl)[0] == whole(jsonl)


def test_out_of_order_events_fall_back_to_the_whole_file(traced, tmp_path):
    chrome, _ = traced
    doc = json.load(open(chrome))
    random.Random(3).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    with pytest.raises(summarize.NotPostOrder):
        acc = summarize.StreamSummary()
        for e in doc["traceEvents"]:
            acc.add(e)
    assert streamed(str(shuffled))[0] == whole(chrome)


def test_out_of_order_trace_counts_alike_in_the_engine_and_the_python_reference(
    traced, tmp_path, monkeypatch
):
    # A loaded trace in any order is put in end order and counted by the engine, or without it
    # by StreamSummary: one set of rules, so the same summary either way.
    chrome, _ = traced
    doc = json.load(open(chrome))
    random.Random(5).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    expected = streamed(chrome)[0]
    assert whole(str(shuffled)) == expected
    monkeypatch.setattr(summarize, "_native", None)
    assert whole(str(shuffled)) == expected
    assert streamed(chrome)[0] == expected


def test_cut_off_trace_streams_as_far_as_it_goes(traced, tmp_path):
    chrome, jsonl = traced
    for source in (chrome, jsonl):
        data = open(source, "rb").read()
        for fraction in (0.3, 0.71):
            cut = tmp_path / ("cut" + os.path.splitext(source)[1])
            cut.write_bytes(data[: int(len(data) * fraction)])
            got, notes = streamed(str(cut))
            assert got == whole(str(cut)), (source, fraction)
            assert got["complete"] is False
            assert len(notes) == 1 and "cut off" in notes[0] and "repair" in notes[0]
    # A gzip stream cut by a crash gives every event that was compressed before the cut.
    data = gzip.compress(open(chrome, "rb").read())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    got, notes = streamed(str(cut))
    assert got["complete"] is False and got["modules"] and "cut off" in notes[0]
    assert "repair" not in notes[0]  # repair rewrites plain text only


def test_damage_in_the_middle_is_reported_not_skipped(traced, tmp_path):
    chrome, _ = traced
    lines = open(chrome).read().split("\n")
    lines[len(lines) // 2] = '{"ph": "X", "name": broken'
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(lines))
    with pytest.raises(errors.TraceError, match="damaged"):
        streamed(str(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "damaged" in proc.stderr


def test_a_json_lines_line_broken_inside_a_string_is_damage(traced, tmp_path):
    # The fast path reads JSON Lines as one array with commas for newlines: a newline inside a
    # string must not make two lines one event (a key "pha,se") but send the file to the general
    # path, which calls it damaged.
    _, jsonl = traced
    lines = open(jsonl).read().split("\n")
    middle = next(i for i in range(len(lines) // 2, len(lines)) if '"phase"' in lines[i])
    lines[middle] = lines[middle].replace('"phase"', '"pha\nse"', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines))
    with pytest.raises(errors.TraceError, match="damaged"):
        list(tracestream.events(str(bad))[1])
    for verb in ("summary", "validate"):
        proc = subprocess.run(
            [sys.executable, "-m", "fqntrace", verb, str(bad)], capture_output=True, text=True
        )
        assert proc.returncode == 1 and "damaged" in proc.stdout + proc.stderr, (verb, proc)


def peak_rss_mb(args):
    """Peak RSS of `python -m fqntrace ARGS` (MiB), measured in a fresh parent so no other
    child of this test process counts."""
    code = (
        "import resource, subprocess, sys\n"
        f"p = subprocess.run([sys.executable, '-m', 'fqntrace'] + {args!r}, "
        "stdout=subprocess.PIPE)\n"
        "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.stdout.write(p.stdout.decode())\n"
        "sys.exit(p.returncode)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1]) / 1024, proc.stdout


def test_summary_peak_memory_is_bounded_by_modules_not_file_size(traced, tmp_path):
    # 120 MiB here (a whole-file read of it takes ~0.9 GB); docs/cli.md has the 1 GB figure.
    chrome, _ = traced
    big = tmp_path / "big.json"
    _, copies = bigtrace.make(chrome, str(big), 120)
    assert os.path.getsize(big) > 100 << 20
    rss, out = peak_rss_mb(["summary", str(big), "--json"])
    assert rss < 200, f"summary of a {os.path.getsize(big) >> 20} MiB trace peaked at {rss:.0f} MiB"
    got = json.loads(out)
    one = whole(chrome)
    # Every copy of the source adds its time: the streamed numbers are the source's x copies.
    for fqn in ("Net", "Net.blocks.0.0", "Global"):
        for phase in trace_events.PHASES:
            assert got["modules"][fqn][phase]["self_ms"] == pytest.approx(
                one["modules"][fqn][phase]["self_ms"] * copies, rel=1e-6, abs=1e-5
            )
            assert got["modules"][fqn][phase]["ops"] == one["modules"][fqn][phase]["ops"] * copies


def test_merge_streams_its_inputs(traced, tmp_path):
    # Two ranks of 40 MiB each (a whole-file merge holds both, ~0.6 GB): flat memory, and the
    # merged trace sums both ranks.
    chrome, _ = traced
    paths = []
    for rank in (0, 1):
        path = tmp_path / f"r{rank}.json"
        _, copies = bigtrace.make(chrome, str(path), 40, rank=rank)
        paths.append(str(path))
    merged = tmp_path / "merged.json"
    rss, out = peak_rss_mb(["merge", *paths, "-o", str(merged)])
    assert rss < 200, f"merge of two 40 MiB traces peaked at {rss:.0f} MiB"
    assert out.startswith("merged: 2 ranks")
    got = summarize.load_for_summary(str(merged))
    one = whole(chrome)
    assert got["ranks"] == [0, 1]
    for phase in trace_events.PHASES:
        assert got["modules"]["Net"][phase]["self_ms"] == pytest.approx(
            one["modules"]["Net"][phase]["self_ms"] * copies * 2, rel=1e-6, abs=1e-5
        )


def test_validate_repair_and_report_stream_in_bounded_memory(traced, tmp_path):
    # 60 MiB (loading it whole took ~0.5 GB for validate, repair and report alike): every verb
    # stays flat, in both formats and gzipped, and says what the whole-file reader said.
    chrome, jsonl = traced
    big = tmp_path / "big.json"
    n_events = bigtrace.make(chrome, str(big), 60)[0]
    big_gz = tmp_path / "big.jsonl.gz"
    n_gz = bigtrace.make(chrome, str(big_gz), 60)[0]
    for path, n in ((big, n_events), (big_gz, n_gz)):
        rss, out = peak_rss_mb(["validate", str(path)])
        assert rss < 150, f"validate {path.name} peaked at {rss:.0f} MiB"
        assert out.startswith(f"ok: {n} events, "), out
    # A crash's cut, 72 % in: repair keeps every complete line, byte for byte.
    data = big.read_bytes()
    at = int(len(data) * 0.72)
    while data[at - 1 : at] == b"\n":  # a cut inside a line, whatever the trace's bytes: one
        at += 1  # right after a newline leaves no partial line (it did, 1 run in a few hundred)
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[:at])
    fixed = tmp_path / "fixed.json"
    rss, out = peak_rss_mb(["repair", str(cut), "-o", str(fixed)])
    assert rss < 150, f"repair peaked at {rss:.0f} MiB"
    kept = data[:at]
    kept = kept[: kept.rindex(b"},\n") + 1]
    n_kept = kept.count(b"\n")  # the header line ends in one newline, each kept event in one
    assert out == f"repaired: kept {n_kept} events (dropped 1 partial line); wrote {fixed}\n"
    assert fixed.read_bytes().startswith(kept) and fixed.read_bytes()[len(kept) :].startswith(
        b"\n]"
    )
    assert peak_rss_mb(["validate", str(fixed)])[1].startswith(f"ok: {n_kept} events")
    del data, kept
    pytest.importorskip("plotly")
    rss, out = peak_rss_mb(["report", str(big), "-o", str(tmp_path / "r.html")])
    assert rss < 200, f"report peaked at {rss:.0f} MiB"
    assert out.startswith("report: ")


def test_one_event_per_line_fast_path_and_general_path_agree(traced, tmp_path, monkeypatch):
    # The same events, lines and end offset whether the chunks decode in one call (the core's
    # layout) or event by event (pretty-printed; damage falls to the same general path).
    chrome, jsonl = traced
    for source in (chrome, jsonl):
        with tracestream.TraceStream(source) as stream:
            batches = list(stream.batches())
            fast = [e for batch, _ in batches for e in batch]
            assert all(line is not None for _, line in batches)  # one event per line: lines known
            keep_end = stream.keep_end
        text = open(source, "rb").read()
        assert text[keep_end - 1 : keep_end] == b"}" and text[keep_end:].lstrip(b",\n")[:1] in (
            b"]",
            b"{",
        )
        if source == chrome:
            doc = json.load(open(source))
            assert fast == doc["traceEvents"]
            pretty = tmp_path / "p.json"
            pretty.write_text(json.dumps(doc, indent=1))
            with tracestream.TraceStream(str(pretty)) as stream:
                assert list(stream) == fast and stream.tail == doc["fqntrace"]
        # Small chunks: events cut across chunk boundaries everywhere.
        monkeypatch.setattr(trace_bytes, "CHUNK_BYTES", 4093)
        with tracestream.TraceStream(source) as stream:
            assert list(stream) == fast and stream.keep_end == keep_end
        monkeypatch.undo()
