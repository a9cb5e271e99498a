"""Reliability (docs/reliability.md): one process, one file; the trace is finished before Python
tears down, and an end that skips the normal exit (an abort in an atexit handler, os._exit,
SIGTERM) still leaves a file that `repair` closes with the last step in it; small defects of the
environment handling and of `repair`, each with its regression test."""

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

TIMEOUT = 240
TORCH_EXIT_ABORT = "terminate called without an active exception"


def clean_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FQNTRACE", "TORCHELASTIC", "MASTER_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    env.update({"OMP_NUM_THREADS": "1"})
    env.update(extra)
    return env


def run_script(tmp_path, code, trace, **env_extra):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=clean_env(FQNTRACE=str(trace), **env_extra),
    )


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )


def valid_trace(path):
    """Parses a complete trace after `validate` accepted it."""
    checked = cli("validate", str(path))
    assert checked.returncode == 0, (path, checked.stdout, checked.stderr)
    with open(path) as f:
        trace = json.load(f)
    assert trace["fqntrace"]["complete"] is True, path
    return trace


def names(trace):
    return [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"]


# ---------------------------------------------------------------------------------------------
# One process, one file: a child that inherits FQNTRACE writes <stem>.pid<PID><ext>.

SPAWN_PROCESS = """
import multiprocessing as mp
import torch

def child(queue):
    with torch.autograd.profiler.record_function("child_work"):
        torch.ones(64).mul(2).sum()
    queue.put(mp.current_process().pid)

if __name__ == "__main__":
    with torch.autograd.profiler.record_function("parent_before"):
        torch.ones(8).add(1)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    children = [ctx.Process(target=child, args=(queue,)) for _ in range(2)]
    for c in children: c.start()
    pids = sorted(queue.get(timeout=120) for _ in children)
    for c in children: c.join()
    with torch.autograd.profiler.record_function("parent_after"):
        torch.ones(8).add(1)
    print(" ".join(map(str, pids)))
"""


def test_spawn_processes_write_their_own_files(tmp_path):
    trace = tmp_path / "run.json"
    proc = run_script(tmp_path, SPAWN_PROCESS, trace)
    assert proc.returncode == 0, proc.stderr
    parent = valid_trace(trace)
    assert {"parent_before", "parent_after"} <= set(names(parent))
    assert "child_work" not in names(parent)
    for pid in proc.stdout.split():
        child = valid_trace(tmp_path / f"run.pid{pid}.json")
        assert "child_work" in names(child)
        assert "parent_before" not in names(child)
    assert proc.stderr == "", proc.stderr


SPAWN_LOADER = """
import torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        with torch.autograd.profiler.record_function("worker_item"):
            return torch.full((4,), float(i)).pow(2)

if __name__ == "__main__":
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, multiprocessing_context="spawn")
    model = torch.nn.Linear(4, 1)
    for batch in loader:
        with torch.autograd.profiler.record_function("train_step"):
            model(batch).sum().backward()
"""


def test_spawn_dataloader_workers_write_their_own_files(tmp_path):
    trace = tmp_path / "run.json"
    proc = run_script(tmp_path, SPAWN_LOADER, trace)
    assert proc.returncode == 0, proc.stderr
    parent = valid_trace(trace)
    assert names(parent).count("train_step") == 4
    assert "worker_item" not in names(parent)
    workers = sorted(glob.glob(str(tmp_path / "run.pid*.json")))
    assert len(workers) == 2, workers
    items = sum(names(valid_trace(w)).count("worker_item") for w in workers)
    assert items == 8


SUBPROCESS = """
import subprocess, sys, torch
with torch.autograd.profiler.record_function("parent_work"):
    torch.ones(8).add(1)
child = subprocess.run([sys.executable, "-c",
    "import os, torch\\n"
    "with torch.autograd.profiler.record_function('child_work'): torch.ones(8).mul(3)\\n"
    "print(os.getpid())"], capture_output=True, text=True, check=True)
sys.stderr.write(child.stderr)
print(child.stdout.strip())
"""


def test_subprocess_running_torch_writes_its_own_file(tmp_path):
    trace = tmp_path / "run.json"
    proc = run_script(tmp_path, SUBPROCESS, trace)
    assert proc.returncode == 0, proc.stderr
    assert "child_work" not in names(valid_trace(trace))
    child = valid_trace(tmp_path / f"run.pid{proc.stdout.strip()}.json")
    assert "child_work" in names(child)
    assert proc.stderr == "", proc.stderr


MP_SPAWN_DDP = """
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
    with torch.autograd.profiler.record_function(f"rank{rank}_step"):
        model(torch.randn(4, 8)).sum().backward()
    dist.barrier()
    # One write(2) per line: two children's prints on the shared pipe must not interleave.
    os.write(1, f"{rank} {os.getpid()}\\n".encode())
    dist.destroy_process_group()

if __name__ == "__main__":
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(worker, args=(2, port), nprocs=2)
"""


def test_mp_spawn_ranks_write_their_own_files(tmp_path):
    """mp.spawn's children have no RANK when tracing starts: {rank} expands to 0 and the pid
    tells them apart (mps.0.pid<PID>.json) until init_process_group gives them their rank:
    then each file takes its rank's name (mps.<R>.pid<PID>.json) and its header says the rank
    and world size. The parent keeps mps.0.json."""
    trace = tmp_path / "mps.{rank}.json"
    proc = run_script(tmp_path, MP_SPAWN_DDP, trace)
    aborted = proc.returncode != 0
    if aborted:
        # torch's gloo abort at interpreter exit (docs/reliability.md) may hit a child after its
        # work; mp.spawn then SIGTERMs the other child. Their files must be repairable.
        assert TORCH_EXIT_ABORT in proc.stderr, proc.stderr
    parent = valid_trace(tmp_path / "mps.0.json")
    assert not [n for n in names(parent) if n.endswith("_step")]
    for line in proc.stdout.split("\n"):
        if not line.strip():
            continue
        rank, pid = line.split()
        path = tmp_path / f"mps.{rank}.pid{pid}.json"
        if aborted:
            assert cli("repair", str(path)).returncode == 0
            assert cli("validate", str(path)).returncode == 0
            child = json.load(open(path))
        else:
            child = valid_trace(path)
        assert f"rank{rank}_step" in names(child)
        assert child["distributedInfo"] == {"backend": "gloo", "rank": int(rank), "world_size": 2}
        labels = [
            e["args"]["labels"] for e in child["traceEvents"] if e.get("name") == "process_labels"
        ]
        assert labels == [f"rank {rank}"]
    assert sorted(p.name for p in tmp_path.glob("mps.*.json")) == sorted(
        ["mps.0.json"]
        + [
            f"mps.{line.split()[0]}.pid{line.split()[1]}.json"
            for line in proc.stdout.split("\n")
            if line.strip()
        ]
    )


def test_a_file_another_live_process_writes_is_never_truncated(tmp_path):
    """Two unrelated processes given the same path: the second does not cut the first's file;
    it says so in one line and runs untraced."""
    trace = tmp_path / "shared.json"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, torch\ntorch.ones(2).add(1)\nimport fqntrace\n"
            "fqntrace.flush()\nprint('ready', flush=True)\nsys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(FQNTRACE=str(trace)),
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        size = os.path.getsize(trace)
        assert size > 0
        second = subprocess.run(
            [sys.executable, "-c", "import torch\ntorch.ones(2).mul(2)\n"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=clean_env(FQNTRACE=str(trace)),
        )
        assert second.returncode == 0
        lines = second.stderr.strip().split("\n")
        assert len(lines) == 1 and "another running process is writing" in lines[0], second.stderr
        assert os.path.getsize(trace) >= size
    finally:
        holder.communicate("\n", timeout=TIMEOUT)
    assert holder.returncode == 0
    assert "aten::mul" not in names(valid_trace(trace))


# ---------------------------------------------------------------------------------------------
# Ends that skip the normal exit. The script marks its last step with record_function.

STEPS = """
import atexit, os, signal, sys
{before}
import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
for step in range(3):
    name = "last_step" if step == 2 else "step"
    with torch.autograd.profiler.record_function(name):
        model(torch.randn(4, 16)).sum().backward()
{after}
"""

ENDINGS = {
    # name: (code before import torch, code after the last step, expected return code, complete)
    "abort_in_atexit_registered_before_tracing": (
        "atexit.register(os.abort)",
        "",
        -signal.SIGABRT,
        True,
    ),
    "abort_in_atexit_registered_after_tracing": (
        "",
        "atexit.register(os.abort)",
        -signal.SIGABRT,
        False,
    ),
    "os_exit": ("", "os._exit(0)", 0, True),
    "sigterm": (
        "",
        "os.kill(os.getpid(), signal.SIGTERM)\nimport time; time.sleep(30)",
        -signal.SIGTERM,
        False,
    ),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_end_without_normal_exit_keeps_the_last_step(tmp_path, ending):
    before, after, code, complete = ENDINGS[ending]
    trace = tmp_path / "t.json"
    proc = run_script(tmp_path, STEPS.format(before=before, after=after), trace)
    assert proc.returncode == code, proc.stderr  # the job ends exactly as it would untraced
    repaired = cli("repair", str(trace))
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.startswith("already complete" if complete else "repaired:"), (
        repaired.stdout
    )
    result = json.load(open(trace))
    assert cli("validate", str(trace)).returncode == 0
    events = names(result)
    assert events.count("step") == 2 and events.count("last_step") == 1, ending
    # Every op of the last step is there: its backward nodes and the optimizer-free loss ops.
    assert events.count("AddmmBackward0") == 6, ending


# ---------------------------------------------------------------------------------------------
# Small defects


def test_bad_value_with_a_newline_warns_on_one_line(tmp_path):
    proc = run_script(tmp_path, "import torch\ntorch.ones(2) + 1\n", str(tmp_path) + "/a\nb/t.json")
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "a\\nb" in proc.stderr and "tracing is off" in proc.stderr


def test_switch_words_are_accepted_and_others_warn(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_script(
        tmp_path,
        "import torch\ntorch.mm(torch.ones(4, 4), torch.ones(4, 4))\n",
        trace,
        FQNTRACE_FLOPS="true",
        FQNTRACE_SHAPES="yes",
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    mm = [e for e in valid_trace(trace)["traceEvents"] if e.get("name") == "aten::mm"]
    assert mm and mm[0]["args"]["flops"] == 128 and mm[0]["args"]["Input Dims"] == [[4, 4], [4, 4]]
    proc = run_script(
        tmp_path,
        "import torch\ntorch.mm(torch.ones(4, 4), torch.ones(4, 4))\n",
        trace,
        FQNTRACE_FLOPS="sure",
    )
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1 and "FQNTRACE_FLOPS=sure" in proc.stderr, proc.stderr
    mm = [e for e in valid_trace(trace)["traceEvents"] if e.get("name") == "aten::mm"]
    assert mm and "flops" not in mm[0]["args"]


def test_rank_outside_the_world_warns_and_traces_nothing(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_script(
        tmp_path, "import torch\ntorch.ones(2) + 1\n", trace, RANK="5", WORLD_SIZE="2"
    )
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1 and "RANK=5 is not below WORLD_SIZE=2" in proc.stderr
    assert not list(tmp_path.glob("t*.json"))


def test_full_disk_with_a_summary_names_every_file_and_leaves_no_empty_summary(tmp_path):
    """A file-size limit stands in for a disk that fills up while the job runs."""
    trace = tmp_path / "t.jsonl"
    code = """
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
    import torch
    model = torch.nn.Linear(8, 8)
    for _ in range(400):
        model(torch.randn(2, 8)).sum().backward()
    print("done")
    """
    proc = run_script(tmp_path, code, trace, FQNTRACE_FORMATS="jsonl,summary")
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    lines = proc.stderr.strip().split("\n")
    assert len(lines) == 1, proc.stderr
    assert str(trace) in lines[0] and "t.summary.json not written" in lines[0], lines[0]
    assert not (tmp_path / "t.summary.json").exists()
    assert cli("repair", str(trace)).returncode == 0
    assert cli("validate", str(trace)).returncode == 0


def test_repair_refuses_files_that_are_not_traces(tmp_path):
    cases = [
        ("notes.json", '{"hello": [1, 2, '),
        ("list.jsonl", '{"a": 1}\n{"b": 2}\n{"c"'),
        ("words.json", "just words\n"),
        # Cut-off traces of other tools: they have traceEvents (or a header line), not ours.
        ("other.json", '{"traceEvents": [\n{"name": "x", "ph": "X", "ts": 1, "dur": 1},\n{"na'),
        ("other.jsonl", '{"ph": "header"}\n{"name": "x", "ph": "X"}\n{"na'),
    ]
    for name, text in cases:
        path = tmp_path / name
        path.write_text(text)
        proc = cli("repair", str(path))
        assert proc.returncode != 0, (name, proc.stdout)
        assert proc.stderr.count("\n") == 1 and "not" in proc.stderr, (name, proc.stderr)
        assert path.read_text() == text  # left as it was


def test_repair_leaves_no_temporary_file_behind(tmp_path):
    """A repair killed while it writes leaves a .fqntrace-*.tmp; the next repair removes stale
    ones (no live process owns them) and leaves none of its own."""
    trace = tmp_path / "t.json"
    proc = run_script(
        tmp_path, STEPS.format(before="", after="os.kill(os.getpid(), signal.SIGKILL)"), trace
    )
    assert proc.returncode == -signal.SIGKILL
    stale = tmp_path / ".fqntrace-abc123.tmp"
    stale.write_text("half a repair")
    os.utime(stale, (1, 1))
    assert cli("repair", str(trace)).returncode == 0
    assert not list(tmp_path.glob(".fqntrace-*")), list(tmp_path.iterdir())
