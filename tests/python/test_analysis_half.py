"""The analysis half of the package (the CLI's modules: readers, summary, verbs) runs where torch
is not installed, imports nothing of the capture half, has no import circle, and summarizes
ranks on a Dask cluster exactly as in the local process pool."""

import ast
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(ROOT, "python", "fqntrace", "analysis")
sys.path.insert(0, HERE)
import bigtrace  # noqa: E402
from test_import_graph import circles  # noqa: E402

# What `python -m fqntrace` may load: the offline readers and verbs (fqntrace.analysis).
ANALYSIS = {
    "cli",
    "cli_args",
    "crossrank",
    "diff",
    "diff_table",
    "kineto_annotate",
    "device_join",
    "memory",
    "merge",
    "repair",
    "report",
    "stats",
    "step_times",
    "steps",
    "summarize",
    "summarize_native",
    "table",
    "top",
    "top.live",
    "top.sources",
    "top.tree",
    "top.screen",
    "top.terminal",
    "tracestream",
    "trace_format",
    "trace_bytes",
    "trace_damage",
    "whole_file",
    "follower",
    "validate",
    "validate_rules",
    "validate_stream",
    "results",
    "inline_view",
    "errors",
    "trace_events",
    "trace_write",
    "sampled",
    "summary_totals",
    "ondemand",
    "ondemand_status",
    "verbs",
}
# Its native summary (analysis/summary_engine.cpp) and merge (analysis/merge_engine.cpp):
# CPython extensions linking no libtorch.
NATIVE = {"_native_summary", "_native_merge"}
TRAIN = """
import torch
net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    net(torch.randn(8, 16)).sum().backward()
    opt.step()
"""


def _source(name):
    """The file of analysis module `name` (dotted below fqntrace.analysis; a package's
    __init__.py)."""
    path = os.path.join(PACKAGE, *name.split("."))
    return os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"


def _on_disk(folder=PACKAGE, prefix=""):
    """The analysis modules in the folder, dotted below fqntrace.analysis, packages too."""
    out = set()
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if entry.endswith(".py") and entry != "__init__.py":
            out.add(prefix + entry[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            out.add(prefix + entry)
            out |= _on_disk(path, prefix + entry + ".")
    return out


def _imports(name):
    """The fqntrace modules `name` imports, at any level (functions too)."""
    tree = ast.parse(open(_source(name)).read())
    out = set()
    for node in ast.walk(tree):
        module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
        if module in ("fqntrace", "fqntrace.analysis"):
            out.update(a.name for a in node.names)
        elif module.startswith("fqntrace.analysis."):
            below = module[len("fqntrace.analysis.") :]
            out.add(below)
            out.update(f"{below}.{a.name}" for a in node.names if f"{below}.{a.name}" in ANALYSIS)
        elif module.startswith("fqntrace."):
            out.add(module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("fqntrace."))
            if any(a.name.split(".")[0] == "torch" for a in node.names):
                out.add("torch")
    return out


def test_analysis_modules_import_no_capture_module_no_torch_and_no_circle():
    assert _on_disk() == ANALYSIS
    graph = {m: _imports(m) for m in ANALYSIS}
    graph.update({m: set() for m in NATIVE})  # a C extension imports no Python module
    for module, deps in graph.items():
        assert deps <= ANALYSIS | NATIVE, (
            f"{module} imports {deps - ANALYSIS - NATIVE} (capture side or torch)"
        )
    assert circles(graph) == []
    # The native module links no libtorch (nor the core): it loads where torch is not installed.
    from fqntrace.analysis import summarize

    if summarize._native is not None:
        ldd = subprocess.run(["ldd", summarize._native.__file__], capture_output=True, text=True)
        assert "libtorch" not in ldd.stdout and "libfqntrace" not in ldd.stdout, ldd.stdout


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    from conftest import run_python

    folder = tmp_path_factory.mktemp("half")
    path = folder / "t.json"
    run_python(TRAIN, {"FQNTRACE": str(path)}, check_rc=0)
    return str(path)


PROFILED = """
import sys, torch, torch.profiler as tp
net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
    net(torch.randn(8, 16)).sum().backward()
prof.profiler.kineto_results.save(sys.argv[1])  # as torch writes it, for `annotate`
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """A torch.profiler trace saved apart and fqntrace's trace of the same run."""
    folder = tmp_path_factory.mktemp("profiled")
    kineto, ours = folder / "kineto.json", folder / "fq.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROFILED, str(kineto)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**{k: v for k, v in os.environ.items() if k != "FQNTRACE"}, "FQNTRACE": str(ours)},
    )
    assert proc.returncode == 0, proc.stderr
    return str(kineto), str(ours)


@pytest.fixture(scope="module")
def venv_without_torch(tmp_path_factory):
    """A fresh venv without torch and fqntrace installed the way a user installs it there:
    `pip install <repository>` with build isolation on (docs/install.md). The isolated build sees
    no torch, so it builds the analysis half: the package, the CLI and its native engines."""
    folder = tmp_path_factory.mktemp("venv")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    # A clean copy of the repository (git's files, as a clone has them): no build trees or venvs.
    source = folder / "src"
    files = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for name in filter(None, files):
        if os.path.isfile(os.path.join(ROOT, name)):
            os.makedirs(source / os.path.dirname(name), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), source / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FQNTRACE")}
    proc = subprocess.run(
        [py, "-m", "pip", "install", "-q", f"{source}[report,top]"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return py


def test_cli_runs_in_a_venv_without_torch(trace, profiled, venv_without_torch, tmp_path):
    py = venv_without_torch
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FQNTRACE")}
    probe = subprocess.run([py, "-c", "import torch"], capture_output=True, env=env)
    assert probe.returncode != 0  # really no torch there

    def cli(python, *args):
        proc = subprocess.run(
            [python, "-m", "fqntrace", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    # The native summary loads there when it is built here (the package carries it).
    from fqntrace.analysis import summarize

    if summarize._native is not None:
        probe = subprocess.run(
            [
                py,
                "-c",
                "from fqntrace.analysis import summarize; print(summarize._native is not None)",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        assert probe.stdout.strip() == "True", probe.stderr
    # The same answers as in the venv that traced it.
    assert json.loads(cli(py, "summary", trace, "--json")) == json.loads(
        cli(sys.executable, "summary", trace, "--json")
    )
    assert cli(py, "validate", trace) == cli(sys.executable, "validate", trace)
    cut = tmp_path / "cut.json"
    data = open(trace, "rb").read()
    cut.write_bytes(data[: len(data) * 2 // 3])
    assert cli(py, "repair", str(cut)).startswith("repaired: kept ")
    assert cli(py, "validate", str(cut)).startswith("ok: ")
    assert cli(py, "merge", trace, "-o", str(tmp_path / "m.json")).startswith("merged: 1 ranks")
    assert "Sequential" in cli(py, "diff", trace, trace)
    report = tmp_path / "r.html"
    cli(py, "report", trace, "-o", str(report))
    assert "Sequential" in report.read_text()
    assert "Sequential" in cli(py, "top", trace, "--once")
    annotated = tmp_path / "annotated.json"
    assert "annotated: cpu_ops" in cli(py, "annotate", *profiled, "-o", str(annotated))
    assert any(
        e.get("args", {}).get("fqn") == "Sequential.0"
        for e in json.loads(annotated.read_text())["traceEvents"]
    )
    # The start-up hook is installed and harmless without torch; doctor says what is there.
    doctor = subprocess.run(
        [py, "-m", "fqntrace", "doctor"],
        capture_output=True,
        text=True,
        env={**env, "FQNTRACE": str(tmp_path / "never.json")},
        timeout=300,
    )
    assert doctor.returncode == 0, doctor.stderr
    assert "analysis half only" in doctor.stdout and "torch: not importable" in doctor.stdout
    assert not (tmp_path / "never.json").exists()
    # The standard library's decoder gives the same events (the fallback without msgspec).
    code = (
        "import json, sys; sys.modules['msgspec'] = None\n"
        "from fqntrace.analysis import summarize\n"
        "print(json.dumps(summarize.load_for_summary(sys.argv[1])))"
    )
    proc = subprocess.run([py, "-c", code, trace], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(cli(sys.executable, "summary", trace, "--json"))
    # fqntrace.load without torch (and without pandas there): the rows as dicts.
    code = (
        "import json, sys, fqntrace\n"
        "print(json.dumps(fqntrace.load(sys.argv[1]).summary(frame=False)))"
    )
    proc = subprocess.run([py, "-c", code, trace], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert {r["fqn"] for r in json.loads(proc.stdout)} >= {"Sequential", "Sequential.0"}


def test_summary_on_a_dask_cluster_equals_the_local_pool(trace, tmp_path):
    distributed = pytest.importorskip("distributed")
    paths = []
    for rank in (0, 1):
        path = tmp_path / f"run.{rank}.json"
        bigtrace.make(trace, str(path), 1, rank=rank)
        paths.append(str(path))
    pattern = str(tmp_path / "run.*.json")
    local = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", pattern, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert local.returncode == 0, local.stderr
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fqntrace",
                "summary",
                pattern,
                "--json",
                "--scheduler",
                cluster.scheduler_address,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        missing = subprocess.run(
            [
                sys.executable,
                "-m",
                "fqntrace",
                "summary",
                str(tmp_path / "nothing.*.json"),
                "--scheduler",
                cluster.scheduler_address,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert json.loads(proc.stdout) == json.loads(local.stdout)
    assert json.loads(proc.stdout)["ranks"] == [0, 1]
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "no worker of the Dask cluster" in missing.stderr and "dask worker" in missing.stderr
    nobody = subprocess.run(
        [sys.executable, "-m", "fqntrace", "summary", pattern, "--scheduler", "tcp://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert nobody.returncode == 1 and "cannot reach the Dask scheduler" in nobody.stderr
