"""Compressed streaming: FQNTRACE=run.json.gz / run.jsonl.gz write gzip as they go. The CLI reads
them as it reads plain traces; a gzip and a plain trace of the same run summarize alike; a
process killed at random moments leaves a file that `repair` closes, with every event flushed
before the kill kept."""

import gzip
import json
import os
import random
import signal
import subprocess
import sys

from conftest import cli
from fqntrace.analysis import summarize, whole_file

KILLS = 10

# Flushes explicitly (fqntrace.flush()) and says so after each flush: what was flushed before the
# last announcement must survive the kill.
LOOP = """
import sys, torch, fqntrace
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
i = 0
while True:
    with torch.profiler.record_function(f"mark {i}"):
        model(torch.randn(8, 32)).sum().backward()
    opt.step()
    if i % 5 == 4:
        fqntrace.flush()
        print(i, flush=True)
    i += 1
"""


def _demo(env_extra):
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env.update(env_extra)
    subprocess.run(
        [sys.executable, "-m", "fqntrace.demo", "--steps", "3", "--layers", "1"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


def test_gzip_and_plain_traces_of_one_run_summarize_alike(tmp_path):
    gz = tmp_path / "run.json.gz"
    _demo({"FQNTRACE": str(gz), "FQNTRACE_FORMATS": "chrome,jsonl.gz"})
    plain = tmp_path / "run.json"
    jsonl_gz = tmp_path / "run.jsonl.gz"
    assert gz.read_bytes()[:2] == b"\x1f\x8b" and jsonl_gz.read_bytes()[:2] == b"\x1f\x8b"
    # A whole gzip file: Python's own gzip (as Perfetto and HTA use) reads it.
    assert json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"]
    for path in (gz, jsonl_gz, plain):
        checked = cli("validate", str(path))
        assert checked.returncode == 0, (path, checked.stdout, checked.stderr)
    summaries = []
    for path in (gz, jsonl_gz, plain):
        proc = cli("summary", "--json", str(path))
        assert proc.returncode == 0, proc.stderr
        s = json.loads(proc.stdout)
        s.pop("trace")
        summaries.append(s)
    assert summaries[0] == summaries[2] and summaries[1] == summaries[2]
    assert summaries[0]["steps"]["recorded"] == 3
    assert os.path.getsize(gz) * 5 < os.path.getsize(plain)


def test_merge_reads_gzip_and_writes_it(tmp_path):
    gz = tmp_path / "run.json.gz"
    _demo({"FQNTRACE": str(gz)})
    out = tmp_path / "merged.json.gz"
    merged = cli("merge", str(gz), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert cli("validate", str(out)).returncode == 0


def test_sigkill_then_repair_keeps_every_flushed_event(tmp_path):
    rng = random.Random(4321)
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    for attempt in range(KILLS):
        path = tmp_path / f"kill{attempt}.json.gz"
        env["FQNTRACE"] = str(path)
        child = subprocess.Popen(
            [sys.executable, "-u", "-c", LOOP], env=env, stdout=subprocess.PIPE, text=True
        )
        flushed = []
        wanted = rng.randint(1, 12)  # a random moment: after the n-th announced flush ...
        while len(flushed) < wanted:
            line = child.stdout.readline()
            assert line, "the traced loop ended early"
            flushed.append(int(line))
        if rng.random() < 0.5:  # ... or a little later, in the middle of the next iterations
            child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()
        child.wait()
        flushed += [int(n) for n in rest.split("\n")[:-1]]

        repaired = cli("repair", str(path))
        assert repaired.returncode == 0, repaired.stderr
        assert repaired.stdout.startswith("repaired:"), repaired.stdout
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # repaired in place, still gzip
        validated = cli("validate", str(path))
        assert validated.returncode == 0, (attempt, validated.stdout, validated.stderr)
        trace = whole_file.load(str(path))
        marks = {e["name"] for e in trace.slices() if e["name"].startswith("mark ")}
        for i in range(flushed[-1] + 1):
            assert f"mark {i}" in marks, (attempt, i, flushed[-1])
        summarize.summarize(trace)  # the repaired trace summarizes
