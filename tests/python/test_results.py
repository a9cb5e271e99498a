"""fqntrace.load(): a trace's results as Python objects, the numbers the CLI prints.

The demo transformer's trace (with steps), the same trace cut off as a crash leaves it, and a
pair of ranks written by two processes: `.summary()`, `.steps()`, `.ranks()` and `.diff()` equal
`python -m fqntrace summary --json` / `diff --json` on the same files, row by row.
"""

import json
import math
import os
import subprocess
import sys

import fqntrace
import pandas
import pytest
import torch
from conftest import run_python
from fqntrace import demo

STEPS = 5
RANK_STEPS = 7  # 6 kept: enough for diff's per-step test


def cli_json(*args, exit_codes=(0,)):
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", *map(str, args), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in exit_codes, proc.stderr
    return json.loads(proc.stdout)


def demo_steps(model, tokens, optimizer, steps):
    for _ in range(steps):
        loss = model(tokens).logsumexp(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def demo_run(folder):
    """(profile()'s value, the trace path): the demo transformer, STEPS training steps."""
    torch.manual_seed(0)
    model = demo.TinyTransformer(vocab=64, dim=16, heads=2, layers=2, seq=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, 64, (2, 8))
    with fqntrace.profile(folder / "demo.json") as run:
        demo_steps(model, tokens, optimizer, STEPS)
        with pytest.raises(RuntimeError, match="after the block"):
            run.summary()
    return run


@pytest.fixture(scope="module")
def cut_trace(folder, demo_run):
    """The demo trace cut mid-line, as a killed process leaves it: at 90 % of its bytes, or later
    when its second step range comes after that (the drain writes the step track when it drains,
    so where the step ranges lie in the file varies from run to run)."""
    data = open(demo_run, "rb").read()
    second_step = data.index(b'"ProfilerStep#', data.index(b'"ProfilerStep#') + 1)
    cut = max(int(len(data) * 0.9), data.index(b"\n", second_step) + 20)
    assert cut < len(data) - 100, "no event after the second step range to cut through"
    path = folder / "cut.json"
    path.write_bytes(data[:cut])
    return str(path)


@pytest.fixture(scope="module")
def rank_pair(folder):
    """Two ranks' traces of the demo, written by two processes (RANK 0 and 1)."""
    pattern = str(folder / "ranks.{rank}.json")
    procs = []
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
        env.update(FQNTRACE=pattern, RANK=str(rank), WORLD_SIZE="2")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fqntrace.demo",
                    "--steps",
                    str(RANK_STEPS),
                    "--dim",
                    "32",
                    "--seq",
                    "16",
                    "--batch",
                    "2",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    return [pattern.format(rank=r) for r in (0, 1)]


def same_number(a, b):
    if isinstance(a, float) and math.isnan(a):
        return b is None
    return a == b


def assert_rows_equal_json(frame, summary):
    """Every cell of .summary()'s DataFrame is the number summary --json has at that place."""
    assert len(frame) > 0
    modules = summary["modules"]
    seen = set()
    for row in frame.to_dict("records"):
        m = modules[row["fqn"]]
        seen.add(row["fqn"])
        p = m[row["phase"]]
        assert row["module_type"] == m["module_type"]
        assert row["calls"] == m["calls"]
        for key, value in row.items():
            if key in p:
                assert same_number(value, p[key]), (row["fqn"], row["phase"], key, value, p[key])
            elif key in m and key != "calls":
                assert same_number(value, m[key]), (row["fqn"], key)
    assert seen == set(modules), "every module of the trace has its rows"


def test_summary_steps_and_table_are_the_clis(demo_run):
    trace = fqntrace.load(demo_run)
    cli = cli_json("summary", demo_run)
    assert trace.json == cli
    frame = trace.summary()
    assert isinstance(frame, pandas.DataFrame)
    assert_rows_equal_json(frame, cli)
    assert {"step_median_ms", "step_self_median_ms", "total_ms", "self_ms", "ops", "flops"} <= set(
        frame.columns
    )
    attn = frame[(frame.fqn == "TinyTransformer.layers.0.attn") & (frame.phase == "backward")]
    assert len(attn) == 1 and attn.iloc[0].step_median_ms > 0
    steps = trace.steps()
    assert list(steps.step) == list(range(STEPS))
    assert list(steps.excluded) == [True] + [False] * (STEPS - 1)
    assert steps.to_dict("records") == cli["steps"]["per_step"]
    text = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", demo_run],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert trace.table() + "\n" == text
    # other steps left out: the CLI's --exclude-steps
    assert fqntrace.load(demo_run, exclude_steps="0-1").json == cli_json(
        "summary", demo_run, "--exclude-steps", "0-1"
    )


def test_a_cut_trace_reads_as_far_as_it_goes_like_the_cli(cut_trace, capfd):
    trace = fqntrace.load(cut_trace)
    assert trace.notes and "cut" in " ".join(trace.notes)
    assert "fqntrace: note:" in capfd.readouterr().err
    cli = cli_json("summary", cut_trace)
    assert trace.json == cli
    assert_rows_equal_json(trace.summary(), cli)
    assert len(cli["steps"]["per_step"]) >= 2
    assert trace.steps().to_dict("records") == cli["steps"]["per_step"]


def test_ranks_are_each_ranks_summary_and_the_spread(rank_pair):
    trace = fqntrace.load(rank_pair)
    cross = cli_json("summary", *rank_pair)
    assert trace.json == cross
    assert fqntrace.load(rank_pair[0].replace(".0.", ".*.")).json == cross  # a pattern too
    frame = trace.summary()
    assert sorted(set(frame["rank"])) == [0, 1]
    for rank, path in enumerate(rank_pair):
        assert_rows_equal_json(
            frame[frame["rank"] == rank].drop(columns="rank"), cli_json("summary", path)
        )
    spread = trace.ranks()
    for row in spread.to_dict("records"):
        p = cross["modules"][row["fqn"]][row["phase"]]
        for key in ("median_ms", "max_ms", "min_ms", "slowest_rank", "self_median_ms"):
            assert row[key] == p[key]
        assert row["total_ms_rank1"] == p["ranks"]["1"]["total_ms"]
    steps = trace.steps()
    assert list(steps.columns[:2]) == ["rank", "step"] and len(steps) == 2 * RANK_STEPS
    with pytest.raises(ValueError, match="several traces"):
        fqntrace.load(rank_pair[0]).ranks()


def test_diff_is_diffs_table_with_its_verdicts_and_gate(demo_run, rank_pair):
    base, new = rank_pair
    cli = cli_json("diff", base, new, "--threshold", "0", exit_codes=(0, 3))
    assert cli["mode"] == "test"  # enough steps for diff's test: its intervals are compared
    table = fqntrace.load(base).diff(new, threshold=0)
    assert list(table.fqn) == [r["fqn"] for r in cli["rows"]]
    assert list(table.verdict) == [r["verdict"] for r in cli["rows"]]
    for mine, theirs in zip(table.to_dict("records"), cli["rows"]):
        low, high = theirs["interval_pct"] or (None, None)
        assert same_number(mine["change_pct"], theirs["change_pct"])
        assert same_number(mine["interval_pct_low"], low)
        assert same_number(mine["interval_pct_high"], high)
        assert same_number(mine["p_value"], theirs["p_value"])
        assert mine["regressed"] == theirs["regressed"]
    assert table.interval_pct_low.notna().sum() > 10
    assert table.attrs["regressions"] == cli["regressions"]
    assert table.attrs["passed"] == (not cli["regressions"])
    # a Trace or a path, the same table
    assert fqntrace.load(base).diff(fqntrace.load(new), frame=False) == fqntrace.load(base).diff(
        new, frame=False
    )


def test_report_is_the_report_of_the_same_files(demo_run, folder):
    out = fqntrace.load(demo_run).report(folder / "mine.html")
    page = open(out, encoding="utf-8").read()
    assert "TinyTransformer.layers.1.mlp.fc2" in page and page.startswith("<!DOCTYPE html>")
    assert demo_run.report(folder / "again.html").endswith("again.html")


def test_profile_without_a_path_writes_a_temporary_trace_and_gives_its_results():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with fqntrace.profile() as first:
        model(torch.randn(2, 4)).sum().backward()
    with fqntrace.profile() as second:
        model(torch.randn(2, 4)).sum().backward()
    assert isinstance(first, str) and first != second and os.path.isfile(first)
    rows = first.summary(frame=False)
    assert {(r["fqn"], r["phase"]) for r in rows} >= {
        ("Sequential.0", "forward"),
        ("Sequential.0", "backward"),
    }
    assert (
        subprocess.run(
            [sys.executable, "-m", "fqntrace", "validate", second], capture_output=True, timeout=300
        ).returncode
        == 0
    )


def test_json_lines_gzip_reads_as_the_cli_reads_it(folder):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with fqntrace.profile(folder / "lines.jsonl.gz") as run:
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            optimizer.step()
    cli = cli_json("summary", run)
    assert run.load().json == cli and cli["steps"]["recorded"] == 3
    assert_rows_equal_json(run.summary(), cli)


def test_without_pandas_the_rows_come_as_dicts(demo_run):
    proc = run_python(f"""
import sys
sys.modules["pandas"] = None  # as if it were not installed
import fqntrace
trace = fqntrace.load({str(demo_run)!r})
rows = trace.summary(frame=False)
assert rows and rows[0]["fqn"] == "TinyTransformer", rows[0]
assert trace.steps(frame=False)[0]["step"] == 0
try:
    trace.summary()
except ImportError as error:
    print(error)
""")
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.strip()
    assert "pip install 'fqntrace[notebook]'" in said and "frame=False" in said
    assert len(said.splitlines()) == 1


def test_bad_input_is_one_line(folder):
    with pytest.raises(fqntrace.TraceError, match="no such file"):
        fqntrace.load(folder / "missing.json")
    bad = folder / "bad.json"
    bad.write_text("this is not a trace")
    with pytest.raises(fqntrace.TraceError) as error:
        fqntrace.load(bad)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError):
        fqntrace.load([folder / "x.json"], exclude_steps="two")
