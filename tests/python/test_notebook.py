"""%%fqntrace in a real notebook: a notebook built with nbformat is executed by nbclient on an
ipykernel, as Jupyter runs it; then exported to HTML by nbconvert and opened in Chromium.

The magic's output holds the model's fqns and the report's icicle (drawn, in the browser), it
runs many times in one kernel (each run its own trace), a cell that raises still shows its
trace, a bad option runs the cell untraced after one line, `fqntrace.load(...).summary()` in
the kernel is a DataFrame whose totals equal `python -m fqntrace summary --json`, and the same
notebook executes a second time.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import cli

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from browser import Page, chromium_binary  # noqa: E402

SET_UP = """\
%load_ext fqntrace
import torch
from fqntrace import demo
torch.manual_seed(0)
model = demo.TinyTransformer(vocab=64, dim=16, heads=2, layers=2, seq=8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
tokens = torch.randint(0, 64, (2, 8))
def train(steps):
    for _ in range(steps):
        loss = model(tokens).logsumexp(-1).mean()
        opt.zero_grad(); loss.backward(); opt.step()"""

CELLS = [
    SET_UP,
    "%%fqntrace -o first.json\ntrain(4)",
    "%%fqntrace --no-chart --depth 1 --memory --steps 1:3\ntrain(4)",
    "print(_.paths[0])",  # the magic's value is the run's Trace
    # a cell that raises: the user's own traceback, and the trace of what ran before it
    "%%fqntrace --no-chart -o raised.json\ntrain(1)\nraise ValueError('the cell fails on its own')",
    "%%fqntrace --frobnicate\nanswer = 41 + 1\nprint('ran', answer)",
    "import fqntrace, json\nresult = fqntrace.load('first.json')\nframe = result.summary()\n"
    "print(json.dumps({'type': type(frame).__name__, 'rows': frame.to_dict('records')}))",
    "result",
]
FIRST, SECOND, SECOND_PATH, RAISES, BAD_OPTION, LOADED, SHOWN = range(1, 8)


def build_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.cells[RAISES].metadata["tags"] = ["raises-exception"]
    return nb


def execute(folder):
    nb = build_notebook()
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    return nb


def outputs(nb, index, kind):
    """The text of one cell's outputs: kind "html", "plain", "stdout", "stderr" or "error"."""
    found = []
    for o in nb.cells[index].get("outputs", []):
        if kind in ("html", "plain") and o["output_type"] in ("execute_result", "display_data"):
            found.append(o["data"].get("text/" + kind, ""))
        elif o["output_type"] == "stream" and o["name"] == kind:
            found.append(o["text"])
        elif kind == "error" and o["output_type"] == "error":
            found.append(o["ename"] + ": " + o["evalue"])
    return "".join(found)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    env_before = os.environ.pop("FQNTRACE", None)
    try:
        return folder, execute(folder)
    finally:
        if env_before is not None:
            os.environ["FQNTRACE"] = env_before


def test_the_magic_shows_the_module_tree_and_table(executed):
    folder, nb = executed
    shown = outputs(nb, FIRST, "html")
    assert 'class="fqntrace-report"' in shown and "<iframe" in shown  # the report's page
    for fqn in (
        "TinyTransformer.layers.0.attn.qkv",
        "TinyTransformer.layers.1.mlp.fc2",
        "TinyTransformer.head",
    ):
        assert fqn in shown
    assert "fwd ms/st" in shown  # the CLI's table under the chart
    assert "first.json (rank 0)" in outputs(nb, FIRST, "plain")
    assert cli("validate", folder / "first.json").returncode == 0


def test_the_magic_runs_again_in_the_same_kernel_with_its_own_trace(executed):
    folder, nb = executed
    second = outputs(nb, SECOND, "html")
    assert "<iframe" not in second  # --no-chart
    plain = outputs(nb, SECOND, "plain")
    assert "  layers" in plain and "      attn" not in plain  # --depth 1: no deeper rows
    path = outputs(nb, SECOND_PATH, "stdout").strip()
    assert os.path.basename(path).startswith("cell-") and plain.startswith(os.path.basename(path))
    assert cli("validate", path).returncode == 0
    summary = json.loads(cli("summary", "--json", path).stdout)
    # --steps 1:3: this run's steps 1 and 2 (the run counts its own steps from 0)
    assert [s["step"] for s in summary["steps"]["per_step"]] == [1, 2]
    assert summary["modules"]["TinyTransformer"]["forward"]["alloc_bytes"] > 0  # --memory


def test_a_cell_that_raises_keeps_its_traceback_and_its_trace(executed):
    folder, nb = executed
    assert "ValueError: the cell fails on its own" in outputs(nb, RAISES, "error")
    assert "TinyTransformer" in outputs(nb, RAISES, "plain")
    assert cli("validate", folder / "raised.json").returncode == 0


def test_a_bad_option_runs_the_cell_untraced_after_one_line(executed):
    _, nb = executed
    assert "ran 42" in outputs(nb, BAD_OPTION, "stdout")
    said = outputs(nb, BAD_OPTION, "stderr").strip().splitlines()
    assert len(said) == 1 and said[0].startswith("fqntrace: %%fqntrace:") and "untraced" in said[0]


def test_load_in_the_kernel_gives_the_clis_numbers(executed):
    folder, nb = executed
    got = json.loads(outputs(nb, LOADED, "stdout"))
    assert got["type"] == "DataFrame"
    summary = json.loads(cli("summary", "--json", folder / "first.json").stdout)
    assert len(got["rows"]) >= len(summary["modules"])
    for row in got["rows"]:
        phase = summary["modules"][row["fqn"]][row["phase"]]
        assert row["total_ms"] == phase["total_ms"] and row["self_ms"] == phase["self_ms"]
        assert row["step_median_ms"] == phase["step_median_ms"]
    assert "TinyTransformer.layers.0.attn" in outputs(nb, SHOWN, "html")


def test_the_same_notebook_executes_a_second_time(executed):
    folder, _ = executed
    again = execute(folder)
    assert "TinyTransformer.layers.0.attn.qkv" in outputs(again, FIRST, "html")
    assert "ran 42" in outputs(again, BAD_OPTION, "stdout")


@pytest.mark.skipif(
    chromium_binary() is None, reason="chromium is not installed (scripts/setup.sh installs it)"
)
def test_the_exported_notebook_draws_the_icicle_in_chromium(executed):
    from nbconvert import HTMLExporter

    folder, nb = executed
    body, _ = HTMLExporter().from_notebook_node(nb)
    page_path = folder / "executed.html"
    page_path.write_text(body, encoding="utf-8")
    inside = (
        "(() => { const f = document.querySelector('iframe.fqntrace-report');"
        " const d = f && f.contentDocument; if (!d) return 0;"
    )
    with Page(width=1300, height=1400) as page:
        page.open(str(page_path))
        slices = page.wait_for(
            inside + " return d.querySelectorAll('#icicle g.slice').length; })()", timeout=60
        )
        assert slices > 10
        labels = page.evaluate(
            inside + " return Array.from(d.querySelectorAll('#icicle g.slice'))"
            ".map((e) => e.textContent).join(' '); })()"
        )
        assert "attn" in labels and "mlp" in labels
        page.screenshot(str(folder / "executed.png"))
        # The page's own errors: nbconvert's template asks a CDN for MathJax, which is offline.
        ours = [e for e in page.errors if "Failed to load resource" not in e]
        assert not ours, ours


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(
    chromium_binary() is None, reason="chromium is not installed (scripts/setup.sh installs it)"
)
def test_jupyter_lab_renders_the_saved_output(executed, tmp_path):
    """The executed notebook, saved and signed as a user's own session signs it, opened in a
    real JupyterLab server: the output's iframe draws the icicle inside JupyterLab's page."""
    pytest.importorskip("jupyterlab")
    from nbformat.sign import NotebookNotary

    _, nb = executed
    home = tmp_path / "lab"
    (home / "data").mkdir(parents=True)
    # The server trusts what this data folder's secret signed (its signatures database too).
    notary = NotebookNotary(data_dir=str(home / "data"))
    notary.sign(nb)
    nbformat.write(nb, str(home / "traced.ipynb"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env.update(
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--IdentityProvider.token=fqntrace",
            f"--ServerApp.root_dir={home}",
            "--allow-root",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = 120
        start = time.monotonic()
        while True:  # the server is up when its API answers
            try:
                urllib.request.urlopen(f"{base}/api/status?token=fqntrace", timeout=5).read()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                assert time.monotonic() - start < deadline, "JupyterLab did not start"
                time.sleep(0.5)
        with Page(width=1300, height=1100, timeout=120) as page:
            page.send("Page.navigate", url=f"{base}/lab/tree/traced.ipynb?token=fqntrace")
            slices = page.wait_for(
                "(() => { const f = document.querySelector('iframe.fqntrace-report');"
                " const d = f && f.contentDocument;"
                " return d ? d.querySelectorAll('#icicle g.slice').length : 0; })()",
                timeout=120,
            )
            assert slices > 10
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def test_bad_option_values_run_the_cell_once_untraced(capfd):
    """In an IPython shell in this process: a bad --exclude-steps or --steps value is said
    before the cell runs, in one line, and the cell runs exactly once, untraced."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "fqntrace")
    shell.user_ns["runs"] = 0
    for line in ("--exclude-steps two", "--steps ten"):
        capfd.readouterr()
        assert shell.run_cell_magic("fqntrace", line, "runs += 1") is None
        said = capfd.readouterr().err.strip().splitlines()
        assert (
            len(said) == 1
            and said[0].startswith("fqntrace: ")
            and said[0].endswith("the cell runs untraced")
        ), said
    assert shell.user_ns["runs"] == 2
