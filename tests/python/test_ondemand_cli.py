"""`python -m fqntrace ps` and `capture` (docs/on-demand.md) against hand-made status records:
a responder thread plays the armed processes (answers the request, rewrites its records through
a capture's states), so the CLI side is tested without a job."""

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from fqntrace.analysis import ondemand, ondemand_status  # noqa: E402
from test_cli import chrome_text, tiny_events  # noqa: E402

HOST = socket.gethostname()
PAD = 4096  # records are padded with spaces to a fixed size, as the processes write them


def run_cli(args, cwd, timeout=60):
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.join(REPO, "python"), env.get("PYTHONPATH")) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "fqntrace", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(proc):
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fqntrace: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def pids():
    """Pids of live processes, for records whose process must be alive."""
    procs = [subprocess.Popen(["sleep", "120"]) for _ in range(3)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture(scope="module")
def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


class Job:
    """A job's trace folder with status records written the way armed processes write them."""

    def __init__(self, root):
        self.root = str(root)
        self.folder = os.path.join(self.root, "traces", ".fqntrace")
        os.makedirs(self.folder)
        self.records = {}

    def path(self, rank):
        return os.path.join(self.folder, f"run.{rank}.json.status")

    def write(self, rank, pid, **fields):
        now = time.time()
        record = {
            "fqntrace_status": 1,
            "pid": pid,
            "host": HOST,
            "rank": rank,
            "world_size": 2,
            "pattern": "traces/run.{rank}.json",
            "trace": f"traces/run.{rank}.json",
            "cwd": self.root,
            "started": now - 100,
            "updated": now,
            "step": 100,
            "steps_per_s": 0.0,
            "state": "armed",
            "window": None,
            "slow": None,
            "notify": False,
            "captures": [],
            "request": None,
        }
        record.update(fields)
        self.records[rank] = record
        self._put(rank)

    def update(self, rank, **fields):
        self.records[rank].update(fields, updated=time.time())
        self._put(rank)

    def _put(self, rank):
        data = json.dumps(self.records[rank]).encode().ljust(PAD)
        mode = "r+b" if os.path.exists(self.path(rank)) else "wb"
        with open(self.path(rank), mode) as f:  # in place, as the processes do
            f.write(data)
            f.truncate()

    def capture_file(self, rank):
        path = os.path.join(self.root, "traces", f"run.{rank}.capture-1.json")
        with open(path, "w") as f:
            f.write(chrome_text(tiny_events(), rank=rank, world_size=2))
        return f"traces/run.{rank}.capture-1.json"

    def request(self):
        try:
            with open(os.path.join(self.folder, "request.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def write_request(self, **fields):
        now = time.time()
        request = {
            "fqntrace_request": 1,
            "id": "old",
            "created": now - 1,
            "expires": now + 60,
            "targets": [],
            "at_step": 200,
            "steps": 3,
            "seconds": None,
            "memory": False,
        }
        request.update(fields)
        with open(os.path.join(self.folder, "request.json"), "w") as f:
            json.dump(request, f)


@pytest.fixture
def job(tmp_path):
    return Job(tmp_path)


class Responder(threading.Thread):
    """Plays the processes of `answers` ({rank: how}): once a new request.json names them, each
    answers and goes through its capture's states ('done', 'failed', 'refused', 'exit')."""

    def __init__(self, job, answers, old_id=None):
        super().__init__(daemon=True)
        self.job, self.answers, self.old_id = job, answers, old_id
        self.seen = None

    def run(self):
        end = time.time() + 20
        while time.time() < end:
            request = self.job.request()
            if request and request.get("id") != self.old_id:
                break
            time.sleep(0.02)
        else:
            return
        self.seen = request
        rid = request["id"]
        named = {t["pid"] for t in request["targets"]}
        ranks = [r for r in self.answers if self.job.records[r]["pid"] in named]
        first = request["at_step"] or 0
        entry = {
            "id": rid,
            "index": 1,
            "reason": "request",
            "first_step": first,
            "last_step": first + (request["steps"] or 1) - 1,
        }
        for rank in ranks:
            how = self.answers[rank]
            if how == "refused":
                self.job.update(
                    rank,
                    request={"id": rid, "answer": "refused", "why": "its step is already past"},
                )
            elif how == "exit":
                os.unlink(self.job.path(rank))
            else:
                self.job.update(
                    rank,
                    request={"id": rid, "answer": "accepted", "why": ""},
                    state="capturing",
                    captures=[dict(entry, state="pending")],
                )
        for state in ("recording", "writing", "end"):
            time.sleep(0.15)  # each state stays for more than one of the CLI's polls
            for rank in ranks:
                how = self.answers[rank]
                if how not in ("done", "failed"):
                    continue
                if state != "end":
                    self.job.update(rank, captures=[dict(entry, state=state)])
                elif how == "done":
                    self.job.update(
                        rank,
                        state="armed",
                        captures=[
                            dict(entry, state="done", file=f"traces/run.{rank}.capture-1.json")
                        ],
                    )
                else:
                    self.job.update(
                        rank,
                        state="armed",
                        captures=[dict(entry, state="failed", error="disk full")],
                    )


def capture_with(job, answers, args, old_id=None):
    responder = Responder(job, answers, old_id)
    responder.start()
    proc = run_cli(["capture", *args], job.root)
    responder.join(timeout=5)
    return proc, responder.seen


# ---------------------------------------------------------------------------------------------
# ps


def test_ps_lists_records_and_marks_stale_and_dead(job, pids, dead_pid):
    job.write(
        1,
        pids[0],
        step=1234,
        steps_per_s=12.5,
        captures=[{"id": "a", "index": 1, "file": "traces/run.1.capture-1.json", "state": "done"}],
    )
    job.write(0, pids[1], updated=time.time() - 60)
    job.write(2, dead_pid)
    job.write(3, 4242, host="evil\x1b[2Jhost", step=7)  # another host: only its age counts
    for where in ("traces", "traces/run.*.json", "traces/run.{rank}.json"):
        proc = run_cli(["ps", where], job.root)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        header, *rows = proc.stdout.splitlines()
        assert header.split() == [
            "RANK",
            "PID",
            "HOST",
            "STEP",
            "STEPS/S",
            "STATE",
            "LAST",
            "CAPTURE",
            "TRACE",
        ]
        assert [row.split()[0] for row in rows] == ["0", "1", "2", "3"]
        assert re.search(r"stale \(6\d s\)", rows[0]), rows[0]
        assert rows[1].split() == [
            "1",
            str(pids[0]),
            HOST,
            "1234",
            "12.5",
            "armed",
            "traces/run.1.capture-1.json",
            "done",
            "traces/run.1.json",
        ]
        assert " dead " in rows[2] and "traces/run.2.json" in rows[2]
        assert "evil\\x1b[2Jhost" in rows[3] and "\x1b" not in proc.stdout and " armed " in rows[3]


def test_ps_pattern_picks_its_records_only(job, pids):
    job.write(0, pids[0])
    job.write(1, pids[1], trace="traces/other.1.json", pattern="traces/other.{rank}.json")
    proc = run_cli(["ps", "traces/run.*.json"], job.root)
    assert proc.returncode == 0, proc.stderr
    assert [row.split()[1] for row in proc.stdout.splitlines()[1:]] == [str(pids[0])]


def test_ps_on_a_folder_without_records_fails_with_one_line(tmp_path):
    proc = run_cli(["ps", str(tmp_path)], str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    line = one_line(proc)
    assert ".fqntrace" in line and "FQNTRACE_STEPS=demand" in line


def test_pointers_find_a_pid_and_every_armed_process(job, pids, dead_pid, tmp_path, monkeypatch):
    pointers = tmp_path / "pointers"
    pointers.mkdir()
    monkeypatch.setattr(ondemand_status, "pointer_folder", lambda: str(pointers))
    job.write(0, pids[0])
    job.write(1, pids[1])
    (pointers / str(pids[0])).write_text(job.path(0) + "\n")
    (pointers / str(pids[1])).write_text(job.path(1))
    (pointers / str(dead_pid)).write_text(job.path(1))  # left over: the record is another's
    (pointers / "7").write_text(str(tmp_path / "gone.status"))  # left over: a clean exit
    statuses, _ = ondemand_status.locate(None)
    assert sorted(s.pid for s in statuses) == sorted(pids[:2])
    assert ondemand_status.locate(str(pids[1]))[0][0].rank == 1
    with pytest.raises(ondemand_status.TraceError, match="not an armed fqntrace process"):
        ondemand_status.locate("123456789")
    with pytest.raises(ondemand_status.TraceError, match="left over"):
        ondemand_status.locate(str(dead_pid))


# ---------------------------------------------------------------------------------------------
# capture: the first step


def test_first_step_counts_the_rate_the_age_and_how_soon_a_request_is_seen():
    def status(host=HOST, notify=True, step=100, rate=10.0, updated=1000.0):
        return ondemand_status.Status(
            "x.status",
            {
                "pid": 1,
                "host": host,
                "step": step,
                "steps_per_s": rate,
                "updated": updated,
                "notify": notify,
            },
        )

    now = 1001.0
    # 100 + 10/s x 1 s old + 10/s x 0.5 s (inotify) = 115, so 116 is the first step not begun
    both = [status(), status(step=90)]
    assert ondemand.see_delay(both) == 0.5
    assert ondemand.first_step(both, now, ondemand.see_delay(both)) == 116
    assert ondemand.first_step(both, now, 0.5, roundup=50) == 150
    for polled in ([status(), status(notify=False)], [status(host="elsewhere")]):
        assert ondemand.see_delay(polled) == 1.25  # 100 + 10 + 12.5 -> 123, then 124
        assert ondemand.first_step(polled, now, 1.25) == 124
    # at 10 steps/s, 124..128 are reached and recorded in 1.8 s: the floor of 60 s holds
    assert ondemand.default_timeout(both, now, 0.3, 124, 5, None) == 60
    slow = [status(rate=0.5)]  # (124 + 5 - 100.5) / 0.5 + 0.3 = 57.3 s, and 30 s more
    assert ondemand.default_timeout(slow, now, 0.3, 124, 5, None) == pytest.approx(87.3)


def test_capture_asks_every_rank_waits_and_summarizes(job, pids, dead_pid):
    job.write(0, pids[0], step=41)
    job.write(1, pids[1], step=40)
    job.write(2, dead_pid, step=10)  # dead: skipped with a note
    for rank in (0, 1):
        job.capture_file(rank)
    # A request that has not expired but whose target finished does not hold up a new one.
    job.write_request(targets=[{"host": HOST, "pid": pids[0]}])
    job.update(
        0,
        request={"id": "old", "answer": "accepted", "why": ""},
        captures=[{"id": "old", "index": 1, "file": "x", "state": "done"}],
    )
    started = time.time()
    proc, request = capture_with(
        job,
        {0: "done", 1: "done"},
        ["traces/run.{rank}.json", "--steps", "3", "--roundup", "5"],
        old_id="old",
    )
    assert proc.returncode == 0, proc.stderr
    # rate 0: the steps stay where they are; the first after the furthest (41) is 42 -> 45
    assert request["at_step"] == 45 and request["steps"] == 3
    assert request["seconds"] is None and request["memory"] is False
    assert sorted(t["pid"] for t in request["targets"]) == sorted(pids[:2])
    assert {t["host"] for t in request["targets"]} == {HOST}
    assert started <= request["created"] <= time.time()
    assert request["expires"] - request["created"] == pytest.approx(60)
    assert re.fullmatch(r"[0-9a-f]{32}", request["id"])
    assert os.listdir(job.folder).count("request.json") == 1
    assert not [n for n in os.listdir(job.folder) if ".tmp." in n]
    err = proc.stderr.splitlines()
    assert err[0] == f"fqntrace: note: skipped rank 2 (pid {dead_pid}, host {HOST}): dead"
    assert err[1] == f"request {request['id']}: steps 45..47 on 2 processes"
    for rank in (0, 1):
        assert f"rank {rank} accepted" in err and f"rank {rank} recording" in err
        assert f"rank {rank} done: traces/run.{rank}.capture-1.json" in err
    summary = run_cli(
        ["summary", "traces/run.0.capture-1.json", "traces/run.1.capture-1.json"], job.root
    )
    assert summary.returncode == 0 and "2 ranks" in summary.stdout
    assert err[8:] == summary.stderr.splitlines()  # the summary's own notes, if any
    # the same table, with the files' absolute paths
    assert proc.stdout == summary.stdout.replace("traces/", os.path.join(job.root, "traces/"))


def test_capture_of_one_rank_prints_its_summary(job, pids):
    # 100 + 0.1/s x ~3 s old + 0.1/s x 1.25 s: below 101, so the first step is 102.
    job.write(0, pids[0], steps_per_s=0.1, updated=time.time() - 3)
    job.capture_file(0)
    proc, request = capture_with(
        job, {0: "done"}, ["traces/run.*.json", "--steps", "2", "--memory", "--timeout", "9"]
    )
    assert proc.returncode == 0, proc.stderr
    assert request["at_step"] == 102 and request["memory"] is True
    assert request["expires"] - request["created"] == pytest.approx(9)
    assert proc.stdout == run_cli(["summary", "traces/run.0.capture-1.json"], job.root).stdout
    assert "Model" in proc.stdout


def test_capture_by_seconds_and_without_summary(job, pids):
    job.write(0, pids[0])
    job.capture_file(0)
    proc, request = capture_with(job, {0: "done"}, ["traces", "--seconds", "2", "--no-summary"])
    assert proc.returncode == 0, proc.stderr
    assert (request["at_step"], request["steps"], request["seconds"]) == (None, None, 2.0)
    assert f"request {request['id']}: 2 s from now on 1 process" in proc.stderr
    assert proc.stdout == os.path.join(job.root, "traces", "run.0.capture-1.json") + "\n"


def test_capture_names_every_rank_that_did_not_finish(job, pids):
    job.write(0, pids[0])
    job.write(1, pids[1])
    job.write(2, pids[2])
    job.capture_file(0)
    proc, _ = capture_with(
        job, {0: "done", 1: "refused", 2: "failed"}, ["traces/run.*.json", "--steps", "1"]
    )
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("fqntrace: capture ") and "did not finish on every process" in last
    assert f"rank 1 (pid {pids[1]}, host {HOST}) refused: its step is already past" in last
    assert f"rank 2 (pid {pids[2]}, host {HOST}) failed: disk full" in last
    assert "rank 0" not in last and "Model" in proc.stdout  # the one done still summarized


def test_capture_times_out_naming_the_rank_that_never_answered(job, pids):
    job.write(0, pids[0])
    job.write(1, pids[1])
    job.capture_file(0)
    started = time.time()
    proc, _ = capture_with(
        job, {0: "done"}, ["traces/run.*.json", "--steps", "2", "--timeout", "1"]
    )
    assert time.time() - started < 10
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].endswith(
        f": rank 1 (pid {pids[1]}, host {HOST}) did not answer in 1 s"
    )
    assert "rank 0 done" in proc.stderr


def test_capture_notices_a_process_that_exits(job, pids):
    job.write(0, pids[0])
    proc, _ = capture_with(job, {0: "exit"}, ["traces/run.*.json", "--steps", "2"])
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].endswith(
        f"rank 0 (pid {pids[0]}, host {HOST}) exited before finishing (its status record is gone)"
    )


# ---------------------------------------------------------------------------------------------
# capture: what it refuses (nothing is asked)


def test_capture_bad_arguments(job, pids, dead_pid):
    job.write(0, pids[0])
    cases = [
        (["traces", "--steps", "0"], 2, "--steps: expected a whole number >= 1"),
        (["traces", "--steps", "2", "--roundup", "2", "--at", "300"], 2, "not allowed"),
        (["traces"], 2, "--steps N"),
        (["traces", "--steps", "2", "--at", "100"], 1, "step 100 is already past"),
        (
            [str(dead_pid), "--steps", "2"],
            1,
            f"pid {dead_pid} is not an armed fqntrace process on this host",
        ),
        (["traces/nothing.*.json", "--steps", "2"], 1, "no status record for traces"),
    ]
    for args, code, words in cases:
        proc = run_cli(["capture", *args], job.root)
        assert proc.returncode == code, (args, proc.stderr)
        assert words in one_line(proc), (args, proc.stderr)
    assert job.request() is None


@pytest.mark.parametrize(
    "busy",
    [
        {"state": "capturing"},
        {
            "captures": [
                {"id": "x", "index": 1, "file": "traces/run.1.capture-1.json", "state": "recording"}
            ]
        },
    ],
)
def test_capture_refuses_when_a_target_is_capturing(job, pids, busy):
    job.write(0, pids[0])
    job.write(1, pids[1], **busy)
    proc = run_cli(["capture", "traces/run.*.json", "--steps", "2"], job.root)
    assert proc.returncode == 1
    assert f"rank 1 (pid {pids[1]}, host {HOST}) is capturing already" in one_line(proc)
    assert job.request() is None


def test_capture_refuses_while_a_request_runs(job, pids):
    job.write(0, pids[0])
    job.write_request(targets=[{"host": HOST, "pid": pids[0]}])
    proc = run_cli(["capture", "traces/run.*.json", "--steps", "2"], job.root)
    assert proc.returncode == 1
    assert "holds request old, which rank 0" in one_line(proc)
    assert job.request()["id"] == "old"


def test_capture_skips_stale_records_and_needs_one_live(job, pids):
    job.write(0, pids[0], updated=time.time() - 60)
    proc = run_cli(["capture", "traces/run.*.json", "--steps", "2"], job.root)
    assert proc.returncode == 1
    note, last = proc.stderr.splitlines()
    assert re.fullmatch(
        rf"fqntrace: note: skipped rank 0 \(pid {pids[0]}, host {HOST}\): "
        r"stale \(6\d s\)",
        note,
    )
    assert last.startswith("fqntrace: no live process to capture")


def test_capture_into_a_read_only_folder_fails_with_one_line(job, pids):
    job.write(0, pids[0])
    if os.geteuid() == 0:  # root writes into a folder without w bits: a request.json it
        os.mkdir(os.path.join(job.folder, "request.json"))  # cannot replace does the same
        open(os.path.join(job.folder, "request.json", "keep"), "w").close()
    os.chmod(job.folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        proc = run_cli(["capture", "traces/run.*.json", "--steps", "2"], job.root)
        names = os.listdir(job.folder)
    finally:
        os.chmod(job.folder, stat.S_IRWXU)
    assert proc.returncode == 1
    assert "cannot write the capture request" in one_line(proc)
    assert not [n for n in names if ".tmp." in n]
