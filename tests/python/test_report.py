"""`python -m fqntrace report` on real traces, opened in headless Chromium: no console errors, the
icicle chart drawn, every module's fqn in the page, a click zooms into a module's children; step
times from ProfilerStep#N ranges; ranks; BASE NEW coloured by change."""

import json
import os
import subprocess
import sys

import fqntrace
import numpy as np
import pytest
import torch
from browser import Page, chromium_binary
from conftest import cli
from fqntrace import demo
from fqntrace.analysis import steps, summarize
from PIL import Image
from slow_block import SLOW_BLOCK, Net, train

pytestmark = pytest.mark.skipif(
    chromium_binary() is None, reason="chromium is not installed (scripts/setup.sh installs it)"
)
ZOOM_INTO = "TinyTransformer.layers.0"
STEPS = 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def demo_trace(folder):
    model = demo.TinyTransformer(vocab=128, dim=32, heads=2, layers=2, seq=16)
    tokens = torch.randint(0, 128, (4, 16))
    return train(model, folder / "demo.json", steps=STEPS, inputs=tokens, step_ranges=True)


@pytest.fixture(scope="module")
def page():
    with Page(width=1400, height=1000) as p:
        yield p


def box_centre(page, node_id):
    """Where the icicle draws the box of node_id (plotly keeps each box's node as its datum)."""
    return page.evaluate(
        "(() => { const s = Array.from(document.querySelectorAll('#icicle g.slice'))"
        f".find((e) => e.__data__.data.data.id === {json.dumps(node_id)});"
        " const r = s.getBoundingClientRect(); return [r.left + r.width / 2,"
        " r.top + r.height / 2]; })()"
    )


def make_report(*args):
    proc = cli("report", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("report: ")
    return proc


def test_steps_come_from_profiler_step_ranges(demo_trace):
    whole, times = summarize.summarize_with_steps(demo_trace)
    per_step = steps.per_step_from(times)
    assert [s["step"] for s in per_step] == list(range(STEPS))
    for s in per_step:
        root = s["modules"]["TinyTransformer"]
        assert root[0] > 0 and root[1] > 0  # forward and backward inside every step
        assert 0 < sum(s["op_ms"].values()) <= s["ms"] + 1e-3
    # The steps hold the traced work but for the few ops that open and close each range.
    in_steps = sum(sum(s["op_ms"].values()) for s in per_step)
    assert 0.5 * whole["step_ms"] < in_steps <= whole["step_ms"] + 1e-3


def test_report_opens_in_chromium_and_zooms_on_click(demo_trace, folder, page, capsys):
    out = folder / "demo.html"
    make_report(demo_trace, "-o", out)
    html = out.read_text()
    # Self-contained: no script, style or image is fetched from anywhere.
    assert "<script src" not in html and "<link" not in html
    page.open(out)
    page.wait_for("document.querySelectorAll('#icicle g.slice').length > 10")
    shot = page.screenshot(str(folder / "demo-report.png"))
    with capsys.disabled():  # in the CI log even when the test passes
        print(f"\nreport screenshot: {shot}")
    assert page.errors == []

    # The chart drew: its area is mostly coloured, in the forward and backward colours.
    box = page.evaluate(
        "(() => { const r = document.getElementById('icicle')"
        ".getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()"
    )
    ratio = page.evaluate("window.devicePixelRatio")
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    area = image[
        int(box[1] * ratio) : int(box[3] * ratio), int(box[0] * ratio) : int(box[2] * ratio)
    ]
    assert area.size > 0
    coloured = (np.abs(area - 255).sum(axis=2) > 30).mean()
    assert coloured > 0.3, f"icicle area is {coloured:.0%} non-white; see {shot}"
    for hex_colour in ("#4c78a8", "#f58518"):  # forward, backward
        rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(area - rgb).sum(axis=2) < 12).sum() > 500, hex_colour

    # Every module of the trace is in the page (the table names them by full fqn).
    text = page.evaluate("document.body.innerText")
    modules = summarize.load_for_summary(demo_trace)["modules"]
    assert len(modules) > 10
    for fqn in modules:
        assert fqn in text, fqn
    # Steps from the ProfilerStep ranges.
    assert page.evaluate("!document.getElementById('steps-section').classList.contains('hidden')")
    assert page.evaluate("document.querySelectorAll('#steps .bars .point').length") >= STEPS

    # Hovering a box shows the module's fqn, type, calls, times per phase and top ops.
    attn = f"{ZOOM_INTO}.attn"
    page.move(*box_centre(page, f"forward|{attn}"))
    hover = page.wait_for(
        "(document.querySelector('#icicle .hoverlayer .hovertext') || {}).textContent"
    )
    for part in (
        attn,
        "Attention",
        f"calls {STEPS}",
        "forward: total",
        "backward: total",
        "top forward ops: aten::",
    ):
        assert part in hover, (part, hover)

    # Click the forward box of layers.0: the view zooms into it and shows its children only.
    target = f"forward|{ZOOM_INTO}"
    page.click(*box_centre(page, target))
    page.wait_for("document.getElementById('icicle').data[0].level === " + json.dumps(target))
    visible_ids = (
        "Array.from(document.querySelectorAll('#icicle g.slice'))"
        ".map((e) => e.__data__.data.data.id)"
    )
    page.wait_for(f"{visible_ids}.every((id) => id.startsWith({json.dumps(target)}))")
    shown = set(page.evaluate(visible_ids))
    children = {f"{target}.{name}" for name in ("ln1", "attn", "ln2", "mlp")}
    assert children <= shown
    assert "forward|TinyTransformer.layers.1" not in shown
    labels = page.evaluate(
        "Array.from(document.querySelectorAll('#icicle g.slice')).map((e) => e.textContent)"
    )
    assert "attn" in labels and "mlp" in labels
    page.screenshot(str(folder / "demo-report-zoomed.png"))
    assert page.errors == []


def test_report_of_base_and_new_colours_by_change(folder, page):
    base = train(Net(), folder / "base.json")
    new = train(Net(slow_block=2), folder / "slow.json")
    out = folder / "diff.html"
    assert "diff" in make_report(base, new, "-o", out).stdout
    page.open(out)
    page.wait_for("document.querySelectorAll('#icicle g.slice').length > 5")
    assert page.errors == []
    trace = page.evaluate(
        "(() => { const t = document.getElementById('icicle').data[0];"
        " return {ids: t.ids, colors: t.marker.colors,"
        " scale: !!t.marker.colorscale}; })()"
    )
    assert trace["scale"]
    change = dict(zip(trace["ids"], trace["colors"]))
    assert change[f"forward|{SLOW_BLOCK}"] > 40  # much slower: red end of the scale
    # The table starts with the module whose own time changed most.
    first = page.evaluate("document.querySelector('#modules tbody tr td').textContent")
    assert first.strip() == SLOW_BLOCK
    page.screenshot(str(folder / "diff-report.png"))


def warm_up_heavy_trace(path, steps=8):
    """Steps of Net (forward, backward, optimizer step), step 0 made ~50x longer by big matmuls
    outside any module: the warm-up a real first step has (allocations, autotuning)."""
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    big = torch.randn(512, 1024), torch.randn(1024, 1024)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with fqntrace.profile(str(path)) as written:
            for k in range(steps):
                if k == 0:
                    for _ in range(6):
                        torch.mm(*big)
                loss = model(x).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return written


def test_step_chart_is_not_scaled_by_the_warm_up_and_the_table_shows_summary_medians(folder, page):
    trace = warm_up_heavy_trace(folder / "warm.json")
    out = folder / "warm.html"
    make_report(trace, "-o", out)
    page.open(out)
    page.wait_for(
        "document.getElementById('steps')._fullLayout !== undefined"
        " && document.querySelectorAll('#modules tbody tr').length > 5"
    )
    assert page.errors == []
    walls = page.evaluate("DATA.runs[0].steps.map((s) => [s.step, s.ms, s.excluded])")
    assert [w[0] for w in walls] == list(range(8)) and walls[0][2] and not walls[1][2]
    kept_max = max(
        max(ms for _, ms, _ in walls[1:]),
        page.evaluate(
            "Math.max(...DATA.runs[0].steps.slice(1).map((s) =>"
            " s.op_ms.forward + s.op_ms.backward + s.op_ms.recompute))"
        ),
    )
    assert walls[0][1] > 5 * kept_max, walls  # the warm-up really is far longer
    # The y axis is set by the kept steps: step 0 runs off the top (marked), the rest is readable.
    low, high = page.evaluate("document.getElementById('steps')._fullLayout.yaxis.range")
    assert low == 0 and kept_max <= high < 2 * kept_max < walls[0][1]
    notes = page.evaluate(
        "document.getElementById('steps')._fullLayout.annotations.map((a) => a.text)"
    )
    assert any(n.startswith("left out") for n in notes), notes
    # Module across steps: the same, and it opens on the module with the most own time.
    mlow, mhigh = page.evaluate(
        "document.getElementById('step-module-chart')._fullLayout.yaxis.range"
    )
    assert mhigh > 0

    # Every time in the table is summary --json's per-step median, to the digit.
    proc = cli("summary", "--json", trace)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["steps"]["excluded"] == [0] and summary["steps"]["count"] == 7
    heads = page.evaluate(
        "Array.from(document.querySelectorAll('#modules thead th')).map((th) => th.textContent)"
    )
    assert "fwd total ms/step" in heads and "bwd self ms/step" in heads
    cells = page.evaluate(
        "Array.from(document.querySelectorAll('#modules tbody tr')).map((tr) =>"
        " Array.from(tr.children).map((td) => [td.textContent, td.dataset.value]))"
    )
    compared = 0
    for row in cells:
        fqn = row[0][0].strip()
        entry = summary["modules"].get(fqn)
        if entry is None:
            continue
        for phase, short in (("forward", "fwd"), ("backward", "bwd")):
            for field, label in (("step_median_ms", "total"), ("step_self_median_ms", "self")):
                text, value = row[heads.index(f"{short} {label} ms/step")]
                expected = entry[phase][field]
                assert float(value) == expected, (fqn, phase, field, value, expected)
                compared += 1
        spread = row[heads.index("±% across steps")][0]
        assert spread.rstrip("!") == f"{entry['step_spread_pct']:.0f}"
        assert spread.endswith("!") == entry["noisy"]
    assert compared >= 4 * 8

    # The header gives the per-step op time, not the run's total with the warm-up in it: the
    # median of the steps' op times. The icicle's root is the sum of the modules' own medians
    # (what its boxes add up to), another number: each says which it is.
    def page_ms(v):  # the page's fmtMs
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"

    meta = page.evaluate("document.getElementById('meta').textContent")
    median_op_ms = summary["steps"]["median_op_ms"]
    assert (
        f"{page_ms(median_op_ms)} ms op time per step (median of 7 steps' sums, step 0 left out)"
    ) in meta, meta
    root = page.evaluate("document.getElementById('icicle').data[0].labels[0]")
    modules_ms = sum(
        e[p]["step_self_median_ms"]
        for e in summary["modules"].values()
        for p in ("forward", "backward", "recompute")
    )
    assert root == f"all phases {page_ms(modules_ms)} ms (sum of the modules' own per-step medians)"
    page.screenshot(str(folder / "warm-report.png"))


def test_report_of_several_ranks_has_a_rank_selector_and_spread(demo_trace, folder, page):
    summary = summarize.load_for_summary(demo_trace)
    paths = []
    for rank in range(2):
        s = json.loads(json.dumps(summary))
        s["rank"] = rank
        if rank == 1:  # rank 1 spends twice as long in the first block's forward
            for phase in ("self_ms", "total_ms", "step_self_median_ms", "step_median_ms"):
                s["modules"][ZOOM_INTO]["forward"][phase] *= 2
        path = folder / f"rank{rank}.summary.json"
        path.write_text(json.dumps(s))
        paths.append(path)
    out = folder / "ranks.html"
    assert "ranks" in make_report(*paths, "-o", out).stdout
    page.open(out)
    page.wait_for("document.querySelectorAll('#spread .boxlayer path').length > 0")
    assert page.errors == []
    assert page.evaluate("document.getElementById('run').options.length") == 2
    row = page.evaluate(
        "Array.from(document.querySelectorAll('#modules tbody tr')).map((tr) =>"
        " Array.from(tr.children).map((td) => td.textContent))"
        f".find((cells) => cells[0].trim() === {json.dumps(ZOOM_INTO)})"
    )
    assert row[-1] == "1"  # slowest rank
    # Switching rank redraws the tree with that rank's numbers.
    page.evaluate(
        "(() => { const s = document.getElementById('run'); s.value = '1';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    value = page.evaluate(
        "(() => { const t = document.getElementById('icicle').data[0];"
        f" return t.values[t.ids.indexOf('forward|{ZOOM_INTO}')]; }})()"
    )
    # (per step: the demo trace has steps, so the tree shows per-step medians as summary does)
    forward = summary["modules"][ZOOM_INTO]["forward"]
    # (the icicle adds up its children's boxes: their own medians)
    assert value == pytest.approx(
        2 * forward["step_self_median_ms"]
        + sum(
            m["forward"]["step_self_median_ms"]
            for f, m in summary["modules"].items()
            if f.startswith(ZOOM_INTO + ".")
        ),
        rel=1e-3,
    )


def test_report_without_plotly_says_how_to_install(demo_trace, folder, tmp_path):
    # A plotly that cannot be imported, first on the path.
    (tmp_path / "plotly").mkdir()
    (tmp_path / "plotly" / "__init__.py").write_text("raise ImportError('no plotly here')\n")
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fqntrace",
            "report",
            str(demo_trace),
            "-o",
            str(tmp_path / "r.html"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    line = proc.stderr.strip()
    assert "\n" not in line and "pip install 'fqntrace[report]'" in line
    assert not (tmp_path / "r.html").exists()


def test_report_reads_the_summary_beside_the_trace(demo_trace, folder):
    # As FQNTRACE_FORMATS=summary writes it: <stem>.summary.json. Marked, to see which was read.
    from fqntrace.analysis import report

    summary = summarize.load_for_summary(demo_trace)
    summary["modules"]["TinyTransformer"]["calls"] = 999
    summary["trace"] = os.path.basename(demo_trace)
    sibling = folder / "demo.summary.json"
    sibling.write_text(json.dumps(summary))
    try:
        data = report.build_data([str(demo_trace)])
        run = data["runs"][0]
        assert run["modules"]["TinyTransformer"]["calls"] == 999
        assert len(run["steps"]) == STEPS  # steps still come from the events
        # A summary of another trace is not taken for this one's.
        summary["trace"] = "another.json"
        sibling.write_text(json.dumps(summary))
        data = report.build_data([str(demo_trace)])
        assert data["runs"][0]["modules"]["TinyTransformer"]["calls"] == STEPS
    finally:
        sibling.unlink()


def test_report_bad_inputs_give_one_line(demo_trace, folder, tmp_path):
    not_a_trace = tmp_path / "notes.json"
    not_a_trace.write_text('{"hello": 1}\n')
    for args in (
        [not_a_trace, "-o", tmp_path / "a.html"],
        [demo_trace, "-o", tmp_path / "a.txt"],
        [tmp_path / "missing.json", "-o", tmp_path / "a.html"],
    ):
        proc = cli("report", *args)
        assert proc.returncode == 1, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fqntrace: "), proc.stderr
    assert not list(tmp_path.glob("*.html"))
    assert cli("report", demo_trace).returncode == 2  # no -o


def test_module_names_that_look_like_markup_stay_text(demo_trace, folder, page):
    summary = summarize.load_for_summary(demo_trace)
    odd = "TinyTransformer.</script><!--<b>x"
    summary["modules"][odd] = summary["modules"]["TinyTransformer.head"]
    path = folder / "odd.summary.json"
    path.write_text(json.dumps(summary))
    out = folder / "odd.html"
    make_report(path, "-o", out)
    page.open(out)
    page.wait_for("document.querySelectorAll('#icicle g.slice').length > 5")
    assert page.errors == []
    cells = page.evaluate(
        "Array.from(document.querySelectorAll('#modules td.fqn'))"
        ".map((td) => td.textContent.trim())"
    )
    assert odd in cells
