"""The native summary engine (fqntrace.analysis._native_summary) gives exactly the summary the
Python loop (summarize.StreamSummary) gives, on real traces of every kind the tests make: a
transformer with training steps and memory events, activation checkpointing (recompute), a
collective, backward module spans, torch.profiler's own trace annotated by fqntrace, JSON Lines,
.gz, cut off, pretty-printed (read by the general path and re-encoded for the engine), and bad
input (the same error text or the same tolerance). Without the module the verbs still work.
validate's checks and top's live view through the engine: the same lines, messages and numbers
as their Python loops."""

import gzip
import json
import os
import random
import re
import subprocess
import sys

import pytest
from fqntrace.analysis import errors, follower, step_times, summarize, validate
from fqntrace.analysis.top.live import NativeLiveSummary
from fqntrace.analysis.top.sources import Source

pytestmark = pytest.mark.skipif(
    summarize._native is None, reason="the native summary is not built (libsimdjson-dev)"
)

PROGRAM = r"""
import os, sys, tempfile, torch
import torch.distributed as dist
import torch.profiler as tp
from torch.utils.checkpoint import checkpoint
import fqntrace
from fqntrace import demo
out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()) for _ in range(2))
        self.head = torch.nn.Linear(16, 1)
    def forward(self, x):
        x = self.blocks[0](x)
        x = checkpoint(self.blocks[1], x, use_reentrant=False)
        return self.head(x)

model = demo.TinyTransformer(vocab=64, dim=16, heads=2, layers=1, seq=8)
tokens = torch.randint(0, 64, (2, 8))
net = Net()
params = list(model.parameters()) + list(net.parameters())
opt = torch.optim.SGD(params, lr=0.01)
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)

def step():
    opt.zero_grad()
    (model(tokens).float().pow(2).mean() + net(torch.randn(4, 16)).pow(2).mean()).backward()
    dist.all_reduce(net.head.weight.grad)
    opt.step()

step()
with fqntrace.profile(out + "/t.json"):
    for _ in range(3):
        step()
    # torch.profiler's own trace, annotated with fqn and phase as fqntrace writes it
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        step()
    prof.export_chrome_trace(out + "/kineto.json")
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("native")
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **{k: v for k, v in os.environ.items() if k != "FQNTRACE"},
            "FQNTRACE_FORMATS": "jsonl",
            "FQNTRACE_MEMORY": "1",
        },
    )
    assert proc.returncode == 0, proc.stderr
    chrome, jsonl = folder / "t.json", folder / "t.jsonl"
    paths = [chrome, jsonl, folder / "kineto.json"]
    data = chrome.read_bytes()
    (folder / "t.json.gz").write_bytes(gzip.compress(data))
    (folder / "cut.json").write_bytes(data[: len(data) * 3 // 5])
    (folder / "cut.jsonl").write_bytes(jsonl.read_bytes()[: len(data) * 2 // 5])
    (folder / "cut.json.gz").write_bytes(gzip.compress(data)[: len(data) // 20])
    (folder / "pretty.json").write_text(json.dumps(json.loads(data), indent=1))
    paths += [
        folder / n for n in ("t.json.gz", "cut.json", "cut.jsonl", "cut.json.gz", "pretty.json")
    ]
    return [str(p) for p in paths]


def both(path, monkeypatch):
    """(native, python): each (summary, notes) or the error it raised, as text."""
    out = []
    for engine in (summarize._native, None):
        monkeypatch.setattr(summarize, "_native", engine)
        monkeypatch.setattr(summarize, "_slow_noted", True)
        notes = []
        try:
            summary, times = summarize.summarize_with_steps(path, notes.append)
            out.append((json.dumps(summary), notes, None if times is None else times._times))
        except errors.TraceError as error:
            out.append((type(error).__name__, str(error)))
    monkeypatch.undo()
    return out


def test_native_summary_equals_the_python_loop_on_real_traces(traces, monkeypatch):
    chrome = traces[0]
    summary = summarize.summarize_stream(chrome)
    modules = summary["modules"]
    # what the traces hold, so each rule of the engine is exercised
    assert summary["steps"]["recorded"] >= 3
    assert any(m["recompute"]["self_ms"] > 0 for m in modules.values())
    assert any(
        m["forward"]["collectives"] > 0 or m["backward"]["collectives"] > 0
        for m in modules.values()
    )
    assert any(m["forward"]["alloc_bytes"] > 0 for m in modules.values())
    text = open(chrome).read()
    assert '"cat":"module_span"' in text.replace(" ", "")
    for path in traces:
        native, python = both(path, monkeypatch)
        assert native == python, path
    kineto = summarize.summarize_stream(traces[2])
    assert any(m["forward"]["self_ms"] > 0 for f, m in kineto["modules"].items() if f != "Global")


# Edits that keep an event line valid JSON but move it off the core's exact spelling: those on
# the left stay plain (the engine's plain-line path reads them), those on the right make
# simdjson read the line. Each must give what the Python loop gives.
PLAIN_EDITS = [
    (r'"ts":(\d+)\.(\d+)', r'"ts":\1.\g<2>0'),  # the same times, other spellings
    (r'"dur":(\d+)\.(\d+)', r'"dur":\1.\g<2>0'),
    (r'"ts":(\d+)\.(\d\d)0\b', r'"ts":\1.\2'),  # two decimals: ns without a division
    (r'"dur":(\d+)\.(\d\d)0\b', r'"dur":\1.\2'),
    (r'"dur":(\d+)\.\d+', r'"dur":-1234567890123.5'),  # past 2^50 ns: by the division
    (r'"dur":(\d+)\.\d+', r'"dur":"\1"'),  # not a number: no duration
    (r'"depth":(\d+)', r'"depth":\1.0'),  # a float depth is no depth
    (r'"depth":(\d+)', r'"depth":"\1"'),
    (r'"fqn":"(?:[^"\\]|\\.)*"', r'"fqn":7'),  # not a string: no fqn
    (r'"phase":"forward"', r'"phase":"warmup"'),  # a phase of its own
    (r'"args":\{', r'"zz":-12.5,"args":{"other":"x",'),  # keys nobody reads
    (r'^\{"ph":("[^"]*"),"cat":("[^"]*")', r'{"cat":\2,"ph":\1'),  # keys in another order
    (r'"args":\{"fqn":("[^"]*"),"phase":("[^"]*")', r'"args":{"phase":\2,"fqn":\1'),
    (r'":', r'" :  '),  # blanks between the tokens
    (r',"', r' ,	"'),
    (r'\}\}$', r'} }  '),
    (r'"cat":"cpu_op"', r'"cat":3'),
    (r'"name":"(?:[^"\\]|\\.)*"', r'"name":-0'),
    (r'"ph":"X"', r'"ph":"footer"'),  # no event (in a Chrome trace)
    (r'"args":\{[^{}]*\}', r'"args":5'),
    (r'"args":\{"fqn"', r'"args":{"self_cpu_ns":1500,"fqn"'),
    (r'"args":\{"fqn"', r'"args":{"self_cpu_ns":1.5,"fqn"'),
    (r'"Addr":\d+', r'"Addr":"0x10"'),
    (r'"Addr":(\d+)', r'"Addr":\1.0'),
    (r'"Bytes":(-?\d+)', r'"Bytes":\1.5'),
    (r'"flops":(\d+)', r'"flops":"\1"'),
    (r'"args":\{', r'"args":{"async_work":0,'),
    (r'"args":\{', r'"args":{"async_work":"",'),
    (r'"args":\{', r'"args":{"collective":"x","Fwd thread id":2,'),
    (r'"id":(\d+)', r'"id":"f\1"'),
    (r'"id":(\d+)', r'"id":\1.0'),
    (r'^\{', r'{"ts":0,'),  # a known key twice: the last counts (simdjson's path)
    (r'"cat":"cpu_op"', r'"cat":"cpu_op","cat":"x"'),
    (r'"name":"', r'"name":1,"name":"'),
    (r'"args":\{', r'"args":{"fqn":"Net.head",'),
    (r'"phase":"(\w+)"', r'"phase":"\1","phase":"backward"'),
    (r'"depth":(\d+)', r'"depth":\1,"depth":0'),
    (r'"name":"', r'"name":"\\u00e9\\"'),  # escapes
    (r'"name":"', r'"name":"\\u00e9'),
    (r'"fqn":"', r'"fqn":"\\/'),
    (r'"name":"', r'"name":"é'),  # UTF-8
    (r'"dur":(\d+)\.(\d+)', r'"dur":\1.\2E0'),  # an exponent
    (r'"ts":(\d+)\.(\d+)', r'"ts":\1.\g<2>000000'),  # too many digits to divide exactly
    (r'"args":\{', r'"args":{"t":true,"n":null,"a":[1,{"b":[]}],'),
    (r'"pid":(\d+)', r'"pid":"\1"'),  # a string pid (and thread key)
    (r'"ph":"X"', r'"ph":"X","phase":1'),
]


def engine_blocks(path):
    """How many blocks of path's event lines the native engine read (raises when it cannot take
    the file: the summary would be the Python loop's)."""
    real, blocks = summarize._native.Engine, []

    class Counting:
        def __init__(self, *args, **kwargs):
            self._engine = real(*args, **kwargs)

        def feed_block(self, chunk, start, end):
            blocks.append(self._engine.feed_block(chunk, start, end))
            return blocks[-1]

        def __getattr__(self, name):
            return getattr(self._engine, name)

    summarize._native.Engine = Counting
    try:
        ranges = step_times.read_step_ranges(path)
        summarize._summarize_native(path, ranges, lambda m: None, step_times.DEFAULT_EXCLUDED)
    finally:
        summarize._native.Engine = real
    return sum(n >= 0 for n in blocks)


def edited_lines(source, rng, used):
    """source's lines, about a third of its events with two of PLAIN_EDITS each (used[k]: how
    often edit k was made)."""
    edits = [(re.compile(a), b) for a, b in PLAIN_EDITS]
    out = []
    for line in open(source).read().split("\n"):
        chrome_comma = line.endswith(",")
        body = line[:-1] if chrome_comma else line
        if body.startswith('{"ph"') and '"footer"' not in body and rng.random() < 0.3:
            for k in rng.sample(range(len(edits)), 2):
                pattern, replacement = edits[k]
                if "footer" in replacement and source.endswith(".jsonl"):
                    continue  # a footer line ends a JSON Lines trace
                edited = pattern.sub(replacement, body, count=1)
                try:
                    json.loads(edited)
                except ValueError:
                    continue  # two edits of one number: not JSON, not a case
                used[k] += edited != body
                body = edited
        out.append(body + ("," if chrome_comma else ""))
    return out


def test_plain_lines_read_as_the_python_loop_reads_them(traces, tmp_path, monkeypatch):
    rng = random.Random(45)
    used = [0] * len(PLAIN_EDITS)
    for source in (traces[0], traces[1]):  # Chrome and JSON Lines
        path = tmp_path / os.path.basename(source)
        path.write_text("\n".join(edited_lines(source, rng, used)))
        native, python = both(str(path), monkeypatch)
        assert native == python, path
        assert engine_blocks(str(path)) > 0  # the engine read the file, not the Python loop
        native, python = validate_both(path, monkeypatch)
        assert native == python, path
    assert all(used), [PLAIN_EDITS[k] for k, n in enumerate(used) if not n]


def engine_sums(engine):
    """An engine's result, the lists it reads out of hash maps put in one order."""
    result = engine.result()
    for key in ("step_times", "step_cpu", "variance"):
        result[key] = sorted(result[key])
    return result


def test_plain_line_path_gives_simdjsons_sums(traces):
    # feed_block reads a block's plain lines byte by byte, feed_event any event by simdjson: the
    # engine's own sums (names, fqns, every count) agree line for line, on the trace as written
    # and edited, where the summary's table would not show a difference (an op's name).
    jsonl = traces[1]
    ranges = summarize._flat_ranges(step_times.read_step_ranges(jsonl))
    lines = open(jsonl).read().split("\n")
    edited = edited_lines(jsonl, random.Random(46), [0] * len(PLAIN_EDITS))
    long_fqn = "Net.blocks.0.0.a_rather_long_name_" * 2  # strings that span 16-byte loads
    odd = [
        lines[i].replace('"fqn":"', f'"fqn":"{long_fqn}{escape}', 1)
        for i, escape in zip(range(1, len(lines), 97), ["\\/", "\\u00e9", "é", "\\n", "x"] * 99)
    ]
    # the last 16 bytes of a block are read a byte at a time: an escape there, blocks of a line
    tails = []
    for line in lines[1:300]:
        event = json.loads(line)
        if "fqn" in event.get("args", {}):
            del event["args"]["fqn"]
            text = json.dumps(event, separators=(",", ":"))
            tails.append(text[:-2] + ',"fqn":"Ne\\u0074"}}')  # "Net", spelt with an escape
    for events, lines_per_block in ((lines, 0), (edited, 0), (odd, 0), (tails, 1)):
        events = [e for e in events if e.startswith("{") and '"footer"' not in e]
        blocks, single = (
            summarize._native.Engine(True, ranges),
            summarize._native.Engine(True, ranges),
        )
        for text in ["\n".join(events)] if lines_per_block == 0 else events:
            assert blocks.feed_block(text.encode(), 0, len(text.encode())) == text.count("\n") + 1
        assert all(single.feed_event(e.encode()) == 1 for e in events)
        assert engine_sums(blocks) == engine_sums(single)


def test_times_read_without_a_division_are_pythons(traces):
    # A plain line's ts and dur with at most three decimals become ns by integers alone
    # (below 2^50 ns), the rest by the division: each must be round(float(text) * 1000), as
    # simdjson's path (feed_event) and the Python loop read them. Each event on a thread and
    # module of its own, so that any time is a valid stream.
    rng = random.Random(50)
    edge = 1 << 50
    times = ["0.0", "-0.000", "0.5", "2.25", "7.125", "999999999999.999", "1125899906842.62"]
    times += ["1125899906842.623", "1125899906842.625", "-1125899906842.624", "0.001", "12"]
    for _ in range(300):
        k = rng.randint(1, 3)
        ns = rng.choice(
            [rng.randrange(edge), edge - 1 - rng.randrange(10**6), rng.randrange(10**9)]
        )
        whole, frac = divmod(ns // 10 ** (3 - k), 10**k)
        times.append(f"{'-' if rng.random() < 0.1 else ''}{whole}.{frac:0{k}d}")
    lines = [
        f'{{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":{i},"ts":{t},"dur":{t.lstrip("-")},'
        f'"args":{{"fqn":"m{i}","phase":"forward","depth":0}}}}'
        for i, t in enumerate(times)
    ]
    blocks, single = summarize._native.Engine(True, []), summarize._native.Engine(True, [])
    text = "\n".join(lines).encode()
    assert blocks.feed_block(text, 0, len(text)) == len(lines)
    assert all(single.feed_event(line.encode()) == 1 for line in lines)
    assert engine_sums(blocks) == engine_sums(single)
    got = {fqn: (first, phases[0][0]) for fqn, _, _, first, phases in blocks.result()["modules"]}
    for i, t in enumerate(times):
        assert got[f"m{i}"] == (round(float(t) * 1000), round(float(t.lstrip("-")) * 1000)), t


def test_alike_strings_and_numbers_of_every_length_read_as_simdjson_reads_them():
    # The interner's cache keys a string by its length and first and last eight bytes: fqns that
    # differ only in the middle share a set (three of them evict each other) and must keep their
    # own modules. Ints of 1 to 18 digits (read eight digits at a time: tids, and flops of up to
    # 16, whose sums stay in 64 bits) must be simdjson's.
    fqns = [f"Model.layers.{i}.attention.qkv_proj" for i in range(3)]  # alike but in the middle
    fqns += ["Global", "x", "Model.layers.10.attention.qkv_proj"]
    rng = random.Random(51)
    lines = []
    for i in range(600):
        digits = i % 18 + 1
        tid = rng.randrange(10 ** (digits - 1), 10**digits)
        flops = rng.randrange(10 ** (min(digits, 16) - 1), 10 ** min(digits, 16))
        fqn = fqns[i % len(fqns)]
        lines.append(
            f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":7,"tid":{tid},"ts":{i}.5,'
            f'"dur":{digits}.25,"args":{{"fqn":"{fqn}","phase":"forward","flops":{flops},'
            f'"depth":0}}}}'
        )
    blocks, single = summarize._native.Engine(True, []), summarize._native.Engine(True, [])
    text = "\n".join(lines).encode()
    assert blocks.feed_block(text, 0, len(text)) == len(lines)
    assert all(single.feed_event(line.encode()) == 1 for line in lines)
    assert engine_sums(blocks) == engine_sums(single)
    modules = {m[0]: m[4][0] for m in blocks.result()["modules"]}
    assert sorted(modules) == sorted(fqns)
    for k, fqn in enumerate(fqns):
        mine = [json.loads(line)["args"] for line in lines[k :: len(fqns)]]
        assert modules[fqn][1] == len(mine)  # ops
        assert modules[fqn][2] == sum(a["flops"] for a in mine)


def test_numbers_simdjson_misreads_go_to_the_python_loop(traces, tmp_path, monkeypatch):
    # simdjson 3.x reads a number of more than 19 digits wrong (get_number() gives 0 for
    # 2.00000000000000000001): the engine declines such a block, and the general path decodes
    # its events in Python and hands them over re-encoded (a float in its shortest spelling).
    text = open(traces[0]).read()
    path = tmp_path / "long.json"
    path.write_text(re.sub(r'"dur":(\d+)\.(\d+)', r'"dur":\1.\g<2>00000000000000000001', text))
    native, python = both(str(path), monkeypatch)
    assert native == python
    assert native == both(traces[0], monkeypatch)[0]  # the same times, spelt longer
    assert engine_blocks(str(path)) == 0


def test_bad_input_behaves_as_in_the_python_loop(traces, tmp_path, monkeypatch):
    lines = open(traces[0]).read().split("\n")
    middle = len(lines) // 2
    op = next(i for i in range(middle, len(lines)) if '"cpu_op"' in lines[i])
    cases = {
        "damaged": {middle: '{"ph": "X", "name": broken'},
        "truncated_line": {middle: lines[middle][: len(lines[middle]) // 2]},
        "wrong_types": {
            op: lines[op].replace('"ts":', '"ts":"x","was":', 1),
            op + 1: lines[op + 1].replace('"args":{', '"args":7,"a":{', 1),
            op + 2: lines[op + 2].replace('"fqn":', '"fqn":3,"f":', 1),
            op + 3: lines[op + 3].replace('"dur":', '"dur":-1,"d":', 1),
            op + 4: lines[op + 4].replace('"phase":', '"phase":null,"p":', 1),
            op + 5: lines[op + 5].replace('"pid":', '"pid":"7","q":', 1),
            op + 7: lines[op + 7].replace('"tid":', '"tid":"9","r":', 1),
        },
        "bad_literal": {op: lines[op].replace('"args":{', '"z":tru,"args":{', 1)},
        "big_integer": {
            op: lines[op].replace('"args":{', '"args":{"flops":123456789012345678901234,', 1)
        },
        "not_in_end_order": {op: lines[op + 3], op + 3: lines[op]},
    }
    for name, edits in cases.items():
        changed = list(lines)
        for i, line in edits.items():
            changed[i] = line
        path = tmp_path / (name + ".json")
        path.write_text("\n".join(changed))
        native, python = both(str(path), monkeypatch)
        assert native == python, name


def test_verbs_work_without_the_module_and_say_so_once(traces):
    code = (
        "import sys; sys.modules['fqntrace.analysis._native_summary'] = None\n"
        "from fqntrace.analysis.cli import main\n"
        "sys.exit(main())"
    )
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    proc = subprocess.run(
        [sys.executable, "-c", code, "summary", traces[0], "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1 and "native summary module is not built" in proc.stderr
    native = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", traces[0], "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert native.returncode == 0 and native.stderr == ""
    assert native.stdout == proc.stdout


# ---------------------------------------------------------------------------------------------
# validate: the engine passes what the Python checks pass and leaves every problem to them


def validate_both(path, monkeypatch):
    """(native, python): validate's line for path, or its error, with the engine and without."""
    out = []
    for engine in (summarize._native, None):
        monkeypatch.setattr(summarize, "_native", engine)
        try:
            out.append(validate.validate_file(str(path)))
        except errors.TraceError as error:
            out.append("error: " + str(error))
    monkeypatch.undo()
    return out


def test_native_validate_passes_what_the_python_checks_pass(traces, monkeypatch):
    for path in traces:
        native, python = validate_both(path, monkeypatch)
        assert native == python, path
    for path in (traces[0], traces[1], traces[3]):  # Chrome, JSON Lines, .gz: the fast way
        found = validate._check_native(path)
        assert found is not None, path
        assert validate._ok_line(*found) == validate.validate_file(path)
        assert found[0] > 1000 and found[1] >= 2


def _lines_with(lines, *needles):
    return [i for i, line in enumerate(lines) if all(n in line for n in needles)]


def test_native_validate_leaves_each_problem_to_the_python_checks(traces, tmp_path, monkeypatch):
    lines = open(traces[0]).read().split("\n")
    ops = _lines_with(lines, '"cpu_op"', '"fqn"')
    op = ops[len(ops) // 2]
    finish = _lines_with(lines, '"ph":"f"') or _lines_with(lines, '"ph": "f"')
    assert finish, "the trace has flows"
    spans = _lines_with(lines, '"module_type"')
    span_fqn = json.loads(lines[spans[0]].rstrip(","))["args"]["fqn"]

    def edit(i, **changes):
        e = json.loads(lines[i].rstrip(","))
        args = changes.pop("args", None)
        e.update(changes)
        if args is not None:
            e["args"].update(args)
        return json.dumps(e) + ("," if lines[i].endswith(",") else "")

    e_op = json.loads(lines[op].rstrip(","))
    cases = {
        "overlap": {op: edit(op, ts=e_op["ts"] - 0.5, dur=e_op["dur"] + 1e6)},
        "missing_flow_end": {finish[0]: ""},
        "bad_phase": {op: edit(op, args={"phase": "sideways"})},
        "empty_fqn": {op: edit(op, args={"fqn": ""})},
        "ph_not_a_string": {op: edit(op, ph=5)},
        "no_tid": {op: lines[op].replace('"tid":', '"t":', 1).replace('"tid": ', '"t": ', 1)},
        "negative_dur": {op: edit(op, dur=-1.0)},
        "flow_id_null": {finish[0]: edit(finish[0], id=None)},
        "module_type_not_a_string": {spans[0]: edit(spans[0], args={"module_type": 3})},
        "fqn_without_span": {op: edit(op, args={"fqn": span_fqn + ".ghost_module"})},
        "not_in_end_order": {op: lines[op + 3], op + 3: lines[op]},
        "flow_again": {
            len(lines) - 3: lines[len(lines) - 3] + "\n" + lines[finish[0]].rstrip(",") + ","
        },
    }
    for name, edits in cases.items():
        changed = [edits.get(i, line) for i, line in enumerate(lines)]
        changed = [line for line in changed if line != ""]
        path = tmp_path / (name + ".json")
        path.write_text("\n".join(changed))
        assert validate._check_native(str(path)) is None, name
        native, python = validate_both(path, monkeypatch)
        # a file not in end order is checked whole (valid here); the rest are problems
        assert native == python and (native.startswith("error: ") or name == "not_in_end_order"), (
            name,
            native,
        )
    # the CLI says it, one line, as the Python checks do
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", "validate", str(tmp_path / "overlap.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "overlap without nesting" in proc.stderr
    # an incomplete trace may lack a flow's end: the engine counts it as the Python checks do
    lacking = [line for i, line in enumerate(lines) if i != finish[0]]
    lacking[-2] = (
        lacking[-2]
        .replace('"complete":true', '"complete":false')
        .replace('"complete": true', '"complete": false')
    )
    path = tmp_path / "incomplete.json"
    path.write_text("\n".join(lacking))
    found = validate._check_native(str(path))
    assert found is not None and found[2].flows == 1
    native, python = validate_both(path, monkeypatch)
    assert native == python and "allowed 1 flow missing one end" in native


# ---------------------------------------------------------------------------------------------
# top: the live view's numbers from the engine equal the Python loop's


def live_numbers(live):
    return (
        live.events,
        live.steps,
        live.first_ns,
        live.latest_ns,
        list(live.module_names()),
        live.since_start(),
        live.recent(),
        live.step_samples(),
        live.steps_per_s(),
    )


def test_native_live_view_equals_the_python_loop(traces, tmp_path, monkeypatch):
    for path in (traces[0], traces[1], traces[3]):
        growing = tmp_path / os.path.basename(path)
        data = open(path, "rb").read()
        growing.write_bytes(b"")
        out = []
        for engine in (summarize._native, None):
            monkeypatch.setattr(summarize, "_native", engine)
            monkeypatch.setattr(follower.Follower, "MAX_READ", 1 << 16)  # many reads
            source = Source(str(growing), window_s=0.05)
            assert isinstance(source.live, NativeLiveSummary) == (engine is not None)
            snapshots = []
            for part in (3, 2, 1):  # the job writes: read in three growing steps
                with open(growing, "wb") as f:
                    f.write(data[: len(data) // part])
                while source.poll() is not None:
                    pass
                source.settle()
                snapshots.append(live_numbers(source.live))
            source.follower.close()
            out.append(snapshots)
            monkeypatch.undo()
        native, python = out
        assert native == python, path
        assert native[-1][1] >= 3 and native[-1][5] and native[-1][6]  # steps, time, recent time


# ---------------------------------------------------------------------------------------------
# repair: the engine's count mode counts what the Python loop counts


def test_native_repair_equals_the_python_loop(traces, tmp_path, monkeypatch):
    from fqntrace.analysis import repair

    pretty = tmp_path / "pretty-cut.json"  # another layout: the general path's events
    text = open(traces[-1]).read()
    # Cut after a whole event (where a killed writer's last flush ends), not inside a line.
    pretty.write_text(text[: text.index("\n  },\n", len(text) * 3 // 5) + len("\n  },\n")])
    for path in traces + [str(pretty)]:
        out = []
        for engine in (summarize._native, None):
            monkeypatch.setattr(summarize, "_native", engine)
            target = tmp_path / ("native" if engine else "python")
            target = str(target) + os.path.basename(path)
            try:
                line = repair.repair_file(path, target).replace(target, "OUT")
            except errors.TraceError as error:
                line = "error: " + str(error)
            out.append((line, open(target, "rb").read() if os.path.exists(target) else None))
        monkeypatch.undo()
        assert out[0] == out[1], path
        if "cut" in os.path.basename(path):
            assert out[0][0].startswith("repaired: kept ") and out[0][1], path
