"""On demand (docs/on-demand.md), against real processes: armed jobs (FQNTRACE_STEPS=demand)
captured from another shell with `python -m fqntrace capture` (by pattern, by pid, two ranks
under torchrun), fqntrace.capture() from the program, the slow-step trigger on an injected slow
episode, and every bad input the issue lists. Each capture file is validated and summarized.

The training loop is tests/python/ondemand_scripts/loop.py; a job that must still run while the
test captures runs until a stop file appears (every rank agrees through an all-reduce), so no
test depends on how fast this machine is.
"""

import glob
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "ondemand_scripts", "loop.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
BOUND = 120  # seconds any one job or command may take


def env_for(fqntrace, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FQNTRACE", "TORCHELASTIC", "MASTER_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    if fqntrace is not None:
        env["FQNTRACE"] = fqntrace
    env.update({k: str(v) for k, v in extra.items()})
    return env


def cli(*args, cwd=None, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=env_for(None),
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def run_loop(cwd, *args, fqntrace="traces/run.{rank}.json", **extra):
    return subprocess.run(
        [sys.executable, LOOP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=env_for(fqntrace, **extra),
    )


class Job:
    """A loop.py job in the background that runs until stop()."""

    def __init__(self, cwd, *args, torchrun=False, fqntrace="traces/run.{rank}.json", **extra):
        self.cwd = cwd
        self.stop_file = os.path.join(cwd, "stop")
        cmd = [sys.executable, LOOP, "--steps", "100000", "--until-file", self.stop_file, *args]
        if torchrun:
            cmd = [TORCHRUN, "--standalone", "--nproc_per_node=2", *cmd[1:]]
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(fqntrace, **extra),
        )
        self.out = self.err = None

    def wait_armed(self, records=1):
        deadline = time.time() + BOUND
        pattern = os.path.join(self.cwd, "traces", ".fqntrace", "*.status")
        while time.time() < deadline:
            ready = [
                p
                for p in glob.glob(pattern)
                if status(p).get("step", 0) >= 20 and status(p).get("steps_per_s", 0) > 0
            ]
            if len(ready) >= records:
                return sorted(ready)
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.1)
        raise AssertionError("the job never published its status records")

    def stop(self):
        open(self.stop_file, "w").close()
        self.out, self.err = self.proc.communicate(timeout=BOUND)
        return self.proc.returncode


def status(path):
    with open(path) as f:
        text = f.read().strip()
    try:
        return json.loads(text)
    except ValueError:  # caught mid-write: read again
        time.sleep(0.05)
        with open(path) as f:
            return json.loads(f.read().strip())


def header(path):
    with open(path) as f:
        trace = json.load(f)
    return trace


def step_numbers(path):
    return sorted(
        int(e["name"].split("#")[1])
        for e in header(path)["traceEvents"]
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    )


def summary_json(path):
    return json.loads(cli("summary", "--json", path).stdout)


def modules(summary):
    """(fqn, phase) -> (ops, self ops, calls) of a summary --json."""
    rows = {}
    for fqn, m in summary["modules"].items():
        for phase in ("forward", "backward", "recompute"):
            p = m.get(phase) or {}
            if p.get("ops"):
                rows[(fqn, phase)] = (p["ops"], p["self_ops"], m.get("calls"))
    return rows


# ---------------------------------------------------------------------------------------------


def test_armed_job_writes_nothing_until_the_program_captures(tmp_path):
    os.makedirs(tmp_path / "traces")
    plain = run_loop(tmp_path, "--steps", "60", fqntrace=None)
    armed = run_loop(tmp_path, "--steps", "60", "--program-capture", "20", FQNTRACE_STEPS="demand")
    assert armed.returncode == 0, armed.stderr
    assert armed.stderr == plain.stderr  # nothing of ours on stderr
    assert armed.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]  # same loss: no numerics
    assert "program capture True" in armed.stdout
    files = sorted(os.listdir(tmp_path / "traces"))
    assert files == [".fqntrace", "run.0.capture-1.json"]  # no trace file of its own
    assert os.listdir(tmp_path / "traces" / ".fqntrace") == []  # the status record went at exit
    capture = str(tmp_path / "traces" / "run.0.capture-1.json")
    cli("validate", capture)
    assert step_numbers(capture) == [21, 22, 23]
    head = header(capture)["capture"]
    assert head["reason"] == "program" and head["first_step"] == 21 and head["steps"] == 3


def test_capture_gets_its_summary_when_the_session_ends(tmp_path):
    # FQNTRACE_FORMATS=summary: a capture's summary is summary --json of its finished file.
    os.makedirs(tmp_path / "traces")
    armed = run_loop(
        tmp_path,
        "--steps",
        "60",
        "--program-capture",
        "20",
        FQNTRACE_STEPS="demand",
        FQNTRACE_FORMATS="summary",
    )
    assert armed.returncode == 0, armed.stderr
    traces = tmp_path / "traces"
    assert sorted(os.listdir(traces)) == [
        ".fqntrace",
        "run.0.capture-1.json",
        "run.0.capture-1.summary.json",
    ]
    written = (traces / "run.0.capture-1.summary.json").read_text()
    assert written == cli("summary", "--json", str(traces / "run.0.capture-1.json")).stdout


def test_capture_matches_the_window_of_the_same_steps(tmp_path):
    os.makedirs(tmp_path / "traces")
    window = run_loop(
        tmp_path, "--steps", "40", FQNTRACE_STEPS="21:24", fqntrace="traces/window.json"
    )
    assert window.returncode == 0, window.stderr
    armed = run_loop(
        tmp_path,
        "--steps",
        "40",
        "--program-capture",
        "20",
        fqntrace="traces/armed.json",
        FQNTRACE_STEPS="demand",
    )
    assert armed.returncode == 0, armed.stderr
    a, b = (
        str(tmp_path / "traces" / "window.json"),
        str(tmp_path / "traces" / "armed.capture-1.json"),
    )
    assert step_numbers(a) == step_numbers(b) == [21, 22, 23]
    assert modules(summary_json(a)) == modules(summary_json(b))


def test_two_captures_by_pattern_and_by_pid(tmp_path):
    os.makedirs(tmp_path / "traces")
    job = Job(tmp_path, "--sleep", "0.01", FQNTRACE_STEPS="demand")
    try:
        (record,) = job.wait_armed()
        pid = status(record)["pid"]
        ps = cli("ps", "traces", cwd=tmp_path).stdout
        assert re.search(rf"^\s*0\s+{pid}\s+\S+\s+\d+\s+[\d.]+\s+armed\b", ps, re.M), ps
        first = cli("capture", "traces/run.*.json", "--steps", "3", cwd=tmp_path)
        second = cli(
            "capture", str(pid), "--steps", "4", "--roundup", "10", "--memory", cwd=tmp_path
        )
    finally:
        assert job.stop() == 0, job.err
    # Nothing of ours; the CPU allocator itself warns once about a free it cannot size, of a
    # block from before the memory capture began (docs/memory.md, as under profile_memory).
    assert [
        line
        for line in job.err.splitlines()
        if "allocated before the profiling started" not in line
    ] == [], job.err
    for proc in (first, second):
        assert "accepted" in proc.stderr and "done" in proc.stderr, proc.stderr
        assert "module" in proc.stdout  # the capture's summary
    one, two = (str(tmp_path / "traces" / f"run.0.capture-{n}.json") for n in (1, 2))
    for path in (one, two):
        cli("validate", path)
    assert len(step_numbers(one)) == 3
    steps = step_numbers(two)
    assert len(steps) == 4 and steps[0] % 10 == 0 and steps[0] > step_numbers(one)[-1]
    assert header(two)["capture"]["id"] in second.stderr
    # --memory: the allocator's reports in that capture only
    assert header(two)["capture"]["memory"] is True and "memory" not in header(one)["capture"]
    kinds = [{e.get("name") for e in header(p)["traceEvents"]} for p in (one, two)]
    assert "[memory]" in kinds[1] and "[memory]" not in kinds[0]


# Ops big enough (~0.1 ms each) that the drain keeps up with the loop on a busy 2-core machine:
# 16x32 ops ran ~10x faster than the drain could write them while another test ran beside it.
NO_STEPS = """
import os, sys, torch
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
x = torch.randn(256, 256)
n = 0
while not os.path.exists(sys.argv[1]):
    with torch.no_grad():
        model(x)
    n += 1
print("calls", n > 0)
"""


def test_seconds_capture_of_a_loop_without_steps(tmp_path):
    os.makedirs(tmp_path / "traces")
    stop = str(tmp_path / "stop")
    job = subprocess.Popen(
        [sys.executable, "-c", NO_STEPS, stop],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for("traces/inf.json", FQNTRACE_STEPS="demand"),
    )
    try:
        record = str(tmp_path / "traces" / ".fqntrace" / "inf.json.status")
        deadline = time.time() + BOUND
        while not os.path.exists(record):
            assert time.time() < deadline and job.poll() is None
            time.sleep(0.1)
        proc = cli("capture", "traces", "--seconds", "1", cwd=tmp_path)
    finally:
        open(stop, "w").close()
        out, err = job.communicate(timeout=BOUND)
    assert job.returncode == 0 and "calls True" in out
    # Nothing on stderr but, on a machine too busy for the drain, the documented line for events
    # the writer dropped (the trace counts them): a capture is still whole and valid then.
    assert [line for line in err.splitlines() if "because the writer fell behind" not in line] == []
    path = str(tmp_path / "traces" / "inf.capture-1.json")
    cli("validate", path)
    capture = header(path)
    assert capture["capture"]["seconds"] == 1 and capture["capture"]["steps"] == 0
    events = [e for e in capture["traceEvents"] if e.get("ph") == "X"]
    assert not any(e["name"].startswith("ProfilerStep#") for e in events)
    calls = [e for e in events if e["name"] == "nn.Module: Sequential"]
    assert len(calls) > 10  # a second of the loop
    span = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e6
    assert 0.8 < span < 3.0, span
    assert "Sequential" in proc.stdout


def test_slow_episode_is_captured_and_its_module_comes_first(tmp_path):
    os.makedirs(tmp_path / "traces")
    # ~0.5 ms steps, ~30 ms in the episode: a factor of 15 no scheduling hiccup of a busy
    # machine reaches, and the episode passes it twice over
    proc = run_loop(
        tmp_path,
        "--steps",
        "150",
        "--slow-from",
        "80",
        "--slow-steps",
        "20",
        FQNTRACE_STEPS="demand",
        FQNTRACE_CAPTURE_SLOW="15",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    captures = sorted(glob.glob(str(tmp_path / "traces" / "run.0.capture-*.json")))
    assert len(captures) == 1, captures  # the cool-down keeps the rest of the episode out
    path = captures[0]
    cli("validate", path)
    reason = header(path)["capture"]["reason"]
    assert reason.startswith("slow step 80: "), reason
    assert step_numbers(path) == [81, 82, 83]
    table = cli("summary", "--sort", "total", "--depth", "1", path).stdout
    children = [line.split()[0] for line in table.splitlines() if line.startswith("  ")]
    assert children[0] == "slowpoke", table


@pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="torchrun not in this venv")
def test_two_ranks_capture_the_same_steps(tmp_path):
    os.makedirs(tmp_path / "traces")
    job = Job(tmp_path, "--sleep", "0.005", torchrun=True, FQNTRACE_STEPS="demand")
    results = []
    try:
        job.wait_armed(records=2)
        for _ in range(3):
            results.append(
                cli(
                    "capture",
                    "traces/run.{rank}.json",
                    "--steps",
                    "3",
                    "--roundup",
                    "5",
                    cwd=tmp_path,
                )
            )
    finally:
        job.stop()
    assert "rank 0 done" in job.out and "rank 1 done" in job.out, job.out + job.err
    for n, proc in enumerate(results, start=1):
        ranks = [str(tmp_path / "traces" / f"run.{r}.capture-{n}.json") for r in (0, 1)]
        for path in ranks:
            cli("validate", path)
        assert step_numbers(ranks[0]) == step_numbers(ranks[1]), proc.stderr
        assert len(step_numbers(ranks[0])) == 3 and step_numbers(ranks[0])[0] % 5 == 0
        assert "rank" in proc.stdout and "DistributedDataParallel" in proc.stdout  # cross-rank


# --- bad input ---------------------------------------------------------------------------------


def one_line_failure(proc, *words):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fqntrace: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_capture_of_a_process_that_is_not_armed(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        one_line_failure(
            cli("capture", str(sleeper.pid), "--steps", "3", check=False), str(sleeper.pid)
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    one_line_failure(cli("capture", str(tmp_path / "none.*.json"), "--steps", "3", check=False))
    assert cli("capture", "x.json", "--steps", "0", check=False).returncode == 2


def test_second_request_while_a_capture_runs_is_refused(tmp_path):
    os.makedirs(tmp_path / "traces")
    job = Job(tmp_path, "--sleep", "0.02", FQNTRACE_STEPS="demand")
    try:
        (record,) = job.wait_armed()
        long = subprocess.Popen(
            [sys.executable, "-m", "fqntrace", "capture", "traces", "--steps", "60"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(None),
        )
        deadline = time.time() + BOUND
        while not any(c.get("state") == "recording" for c in status(record).get("captures", [])):
            assert time.time() < deadline
            time.sleep(0.05)
        second = cli("capture", "traces", "--steps", "3", cwd=tmp_path, check=False)
        one_line_failure(second, "capturing already")
        out, err = long.communicate(timeout=BOUND)
        assert long.returncode == 0, err
    finally:
        assert job.stop() == 0
    assert job.err == ""


def test_rank_that_dies_mid_capture_is_named(tmp_path):
    os.makedirs(tmp_path / "traces")
    # Two jobs sharing a folder stand for two ranks; the second dies while capturing.
    a = Job(tmp_path, "--sleep", "0.02", fqntrace="traces/a.json", FQNTRACE_STEPS="demand")
    b = Job(tmp_path, "--sleep", "0.02", fqntrace="traces/b.json", FQNTRACE_STEPS="demand")
    try:
        a.wait_armed(records=2)
        victim = status(str(tmp_path / "traces" / ".fqntrace" / "b.json.status"))["pid"]
        cap = subprocess.Popen(
            [sys.executable, "-m", "fqntrace", "capture", "traces", "--steps", "40"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(None),
        )
        record = str(tmp_path / "traces" / ".fqntrace" / "b.json.status")
        deadline = time.time() + BOUND
        while not any(c.get("state") == "recording" for c in status(record).get("captures", [])):
            assert time.time() < deadline
            time.sleep(0.05)
        b.proc.send_signal(signal.SIGKILL)
        out, err = cap.communicate(timeout=BOUND)
    finally:
        a.stop()
        b.stop()
    assert cap.returncode == 1
    assert f"pid {victim}" in err.strip().splitlines()[-1], err
    cli("validate", str(tmp_path / "traces" / "a.capture-1.json"))  # the live one finished


def test_stale_request_from_an_earlier_run_is_ignored(tmp_path):
    os.makedirs(tmp_path / "traces")
    job = Job(tmp_path, "--sleep", "0.01", FQNTRACE_STEPS="demand")
    try:
        (record,) = job.wait_armed()
        now = time.time()
        request = {
            "fqntrace_request": 1,
            "id": "old",
            "created": now - 3600,
            "expires": now + 3600,
            "at_step": status(record)["step"] + 50,
            "steps": 3,
            "seconds": None,
            "memory": False,
            "targets": [{"host": socket.gethostname(), "pid": status(record)["pid"]}],
        }
        folder = tmp_path / "traces" / ".fqntrace"
        with open(folder / "request.tmp", "w") as f:  # written before this process started
            json.dump(request, f)
        os.replace(folder / "request.tmp", folder / "request.json")
        time.sleep(2.5)  # two polls: the request has been read, whether inotify said so or not
        assert "request" not in status(record) and status(record)["captures"] == []
    finally:
        assert job.stop() == 0
    assert job.err == ""
    assert not glob.glob(str(tmp_path / "traces" / "*.capture-*"))


def test_status_folder_that_cannot_be_written(tmp_path):
    os.makedirs(tmp_path / "traces")
    open(tmp_path / "traces" / ".fqntrace", "w").close()  # a file where the folder would be
    plain = run_loop(tmp_path, "--steps", "40", fqntrace=None)
    proc = run_loop(tmp_path, "--steps", "40", "--program-capture", "10", FQNTRACE_STEPS="demand")
    assert proc.returncode == 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot create" in lines[0] and "the job runs on" in lines[0], (
        proc.stderr
    )
    assert proc.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]
    cli("validate", str(tmp_path / "traces" / "run.0.capture-1.json"))  # captures still work


def test_status_file_system_that_stops_answering_never_stalls_training(tmp_path):
    # A FIFO where the status record goes: opening it for writing blocks until a reader comes,
    # as a call into a hung NFS mount would. The loop must run, capture and exit as usual.
    folder = tmp_path / "traces" / ".fqntrace"
    os.makedirs(folder)
    os.mkfifo(folder / "run.0.json.status")
    start = time.time()
    proc = run_loop(tmp_path, "--steps", "200", "--program-capture", "150", FQNTRACE_STEPS="demand")
    took = time.time() - start
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "rank 0 done 200" in proc.stdout
    assert stat.S_ISFIFO(os.stat(folder / "run.0.json.status").st_mode)
    cli("validate", str(tmp_path / "traces" / "run.0.capture-1.json"))
    assert took < 60, took  # the exit waited for the stuck thread a bounded time only
