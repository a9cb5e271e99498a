"""`python -m fqntrace top`: following growing traces (follower.Follower) and the live view,
driven in a tmux pane next to a traced training loop (TOP_LOOP) that runs ~10 s."""

import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib

import pytest
from conftest import read_top
from fqntrace.analysis import follower, steps, summarize
from fqntrace.analysis.top.live import CPU, LiveSummary, NativeLiveSummary
from fqntrace.analysis.top.tree import build_rows

TMUX = shutil.which("tmux")
SOCKET = f"fqntrace-test-{os.getpid()}"  # our own tmux server, never the user's

TOP_LOOP = """
import sys, time, torch
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 64)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Block()
        self.dec = Block()
    def forward(self, x):
        return self.dec(self.enc(x))
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
end = time.time() + float(sys.argv[1])
step = 0
while time.time() < end:
    with torch.autograd.profiler.record_function(f"ProfilerStep#{step}"):
        net(torch.randn(32, 64)).sum().backward()
        opt.step()
        opt.zero_grad()
    step += 1
"""


# ---------------------------------------------------------------------------------------------
# Follower: what a running job appended, a poll at a time


def header_line(rank=0):
    return (
        '{"schemaVersion": 1, "distributedInfo": {"rank": %d, "world_size": 1}, '
        '"traceEvents": [\n' % rank
    )


def op(ts, name="aten::mm", fqn="Net", phase="forward", depth=0):
    return json.dumps(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 1.0,
            "args": {"fqn": fqn, "phase": phase, "depth": depth},
        }
    )


def poll(f):
    """The events appended since the last read, and whether the file restarted, all parsed by
    the follower (as `top` reads them without the native engine)."""
    data, end, restarted = f.read_lines()
    return f.poll_events(data, end, lambda *block: None)[0], restarted


def test_follower_reads_only_complete_lines_and_waits_for_the_file(tmp_path):
    path = tmp_path / "t.json"
    f = follower.Follower(str(path))
    assert poll(f) == ([], False) and f.state == "waiting"
    with open(path, "w") as out:
        out.write(header_line(3) + op(1.0) + ",\n" + op(3.0)[:20])
        out.flush()
        events, restarted = poll(f)
        assert [e["ts"] for e in events] == [1.0] and not restarted
        assert f.header["distributedInfo"]["rank"] == 3 and f.state == "reading"
        out.write(op(3.0)[20:] + ",\n" + op(5.0) + "\n")
        out.flush()
        assert [e["ts"] for e in poll(f)[0]] == [3.0, 5.0]
        out.write('], "fqntrace": {"dropped_events": 7, "complete": true}}\n')
    assert poll(f) == ([], False) and f.state == "ended" and f.tail["dropped_events"] == 7


def test_follower_starts_over_when_the_file_is_replaced_or_truncated(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"ph": "header", "schemaVersion": 1}\n' + op(1.0) + "\n" + op(2.0) + "\n")
    f = follower.Follower(str(path))
    assert len(poll(f)[0]) == 2
    # rotated: a new file under the same name
    new = tmp_path / "new.jsonl"
    new.write_text('{"ph": "header", "schemaVersion": 1}\n' + op(9.0) + "\n")
    os.replace(new, path)
    events, restarted = poll(f)
    assert restarted and [e["ts"] for e in events] == [9.0]
    # truncated in place (a new run opening it with O_TRUNC): shorter than what was read
    with open(path, "w") as out:
        out.write('{"ph": "header", "schemaVersion": 2}\n')
    events, restarted = poll(f)
    assert restarted and events == [] and f.header == {"schemaVersion": 2}


def test_follower_decompresses_a_growing_gzip_stream(tmp_path):
    path = tmp_path / "t.json.gz"
    comp = zlib.compressobj(wbits=31)
    text = header_line() + ",\n".join(op(float(i)) for i in range(100)) + ",\n"
    with open(path, "wb") as out:
        f = follower.Follower(str(path))
        out.write(comp.compress(text[:1000].encode()) + comp.flush(zlib.Z_SYNC_FLUSH))
        out.flush()
        first = poll(f)[0]
        out.write(comp.compress(text[1000:].encode()) + comp.flush(zlib.Z_SYNC_FLUSH))
        out.flush()
        rest = poll(f)[0]
    assert first and [e["ts"] for e in first + rest] == [float(i) for i in range(100)]
    # A writer that closes a gzip member and starts another (concatenated members)
    with open(path, "ab") as out:
        out.write(comp.flush() + gzip.compress((op(100.0) + ",\n").encode()))
    assert [e["ts"] for e in poll(f)[0]] == [100.0]


def test_live_summary_counts_steps_and_forgets_old_seconds():
    live = LiveSummary(window_s=2)
    for second in range(5):
        ts = second * 1e6  # µs
        live.add(json.loads(op(ts + 10)))
        live.add(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{second}",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": 500.0,
                "args": {"fqn": "Global", "phase": "forward", "depth": 0},
            }
        )
        live.settle()
    assert live.since_start()[("forward", "Net")] == 5 * 1000
    assert live.recent()[("forward", "Net")] == 3 * 1000  # seconds 2, 3, 4
    assert live.steps == 5 and live.steps_per_s() == pytest.approx(2 / 2.0)


def test_live_per_step_medians_leave_the_warm_up_out_as_summary_does():
    # Steps 0..5 of 1 ms each; Net's op in step k lasts 100 µs, except the warm-up (step 0):
    # 900 µs. Step ranges arrive after their ops (the core writes them when the step ends), and
    # step 3's op only after its range: both still land in their step.
    live = LiveSummary(window_s=60)
    durs = [900.0, 100.0, 110.0, 90.0, 100.0, 120.0]
    for k, dur in enumerate(durs):
        ts = k * 1000.0
        event = json.loads(op(ts + 10))
        event["dur"] = dur
        step = {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{k}",
            "pid": 1,
            "tid": 9,
            "ts": ts,
            "dur": 1000.0,
            "args": {"fqn": "Global", "phase": "forward"},
        }
        for e in [step, event] if k == 3 else [event, step]:
            live.add(e)
            live.settle()
    per, n = live.step_samples()
    # Step 0 left out, step 5 (the last read) waits for late time: steps 1..4.
    assert n == 4 and per[("forward", "Net")] == [100_000, 110_000, 90_000, 100_000]
    # The same median `summary` gives per step: 0.1 ms.
    rows = build_rows([type("S", (), {"live": live, "rank": 0})()])
    assert rows[0].fqn == "Net" and rows[0].step_median("forward") == 100_000
    everything = LiveSummary(window_s=60, exclude_steps=frozenset())
    for k, dur in enumerate(durs):
        event = json.loads(op(k * 1000.0 + 10))
        event["dur"] = dur
        everything.add(event)
        everything.add(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k}",
                "pid": 1,
                "tid": 9,
                "ts": k * 1000.0,
                "dur": 1000.0,
                "args": {"fqn": "Global", "phase": "forward"},
            }
        )
        everything.settle()
    assert everything.step_samples()[0][("forward", "Net")][0] == 900_000


# ---------------------------------------------------------------------------------------------
# The live view in tmux


def tmux(*args, check=True):
    return subprocess.run(
        [TMUX, "-L", SOCKET, *args], capture_output=True, text=True, check=check, timeout=30
    )


def screen(name):
    return tmux("capture-pane", "-p", "-t", name).stdout


def wait_for(name, predicate, timeout=90, what=""):
    """Polls the pane until predicate(text) holds; returns the text (fails after timeout)."""
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = screen(name)
        if predicate(text):
            return text
        time.sleep(0.3)
    pytest.fail(f"tmux pane never showed {what}:\n{text}")


def root_sum_fwd(text):
    """The Σfwd column of the Net row: module, fwd, bwd, %, Σfwd, Σbwd."""
    for line in text.splitlines():
        cells = line.split()
        if cells[:2] in (["-", "Net"], ["+", "Net"]) and len(cells) >= 7:
            return float(cells[5])
    return None


@pytest.fixture(scope="module")
def tmux_server():
    """Our tmux server for the module, kept alive by an idle session: tmux exits when its last
    session is killed, and a test's new-session racing that exit failed ("server exited")."""
    if TMUX is None:
        pytest.skip("tmux not installed (scripts/setup.sh installs it)")
    tmux("new-session", "-d", "-s", "keep-alive", "sleep 100000")
    yield itertools.count()
    tmux("kill-server", check=False)


@pytest.fixture
def pane(tmp_path, tmux_server):
    """Starts `top` in a tmux pane; yields (session name, start(args...))."""
    pytest.importorskip("rich")
    names = []

    def start(*args):
        name = f"top{next(tmux_server)}"  # unique in the module: a slow kill never collides
        names.append(name)
        env = " ".join(
            f"{k}={v}"
            for k, v in (
                ("PYTHONPATH", os.environ.get("PYTHONPATH", "")),
                ("TERM", "xterm-256color"),
            )
        )
        command = (
            f"env {env} {sys.executable} -m fqntrace top {' '.join(args)}; "
            "echo TOP-EXITED $?; sleep 120"
        )
        tmux("new-session", "-d", "-s", name, "-x", "150", "-y", "45", command)
        return name

    yield start
    for name in names:
        tmux("kill-session", "-t", name, check=False)


def train(path, seconds=10):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
    env.update({"FQNTRACE": str(path), "OMP_NUM_THREADS": "1"})
    return subprocess.Popen(
        [sys.executable, "-c", TOP_LOOP, str(seconds)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory):
    """The demo transformer traced for 12 training steps, with thread CPU time (cpu/st)."""
    path = tmp_path_factory.mktemp("top") / "demo.json"
    env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
    env["FQNTRACE"] = str(path)
    env["FQNTRACE_CPU"] = "1"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fqntrace.demo",
            "--steps",
            "12",
            "--dim",
            "32",
            "--seq",
            "16",
            "--batch",
            "2",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return str(path)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_per_step_columns_are_the_steps_summary_counts(demo_trace, engine, monkeypatch):
    """fwd/st and bwd/st come from each kept step's time: per module and step the same
    numbers as the summary's per-step times (steps.per_step_from) on a real trace, read whole
    (as `top --once` reads it) by the native engine and by the Python loop. They were empty:
    neighbouring outermost ranges were merged until a read ended, so a whole read's time
    counted in one step and every median was 0."""
    if engine == "python":
        monkeypatch.setattr(summarize, "_native", None)
    elif summarize._native is None:
        pytest.skip("the native summary engine is not built")
    source, rows = read_top(demo_trace)
    assert isinstance(source.live, NativeLiveSummary) == (engine == "native")
    summary, times = summarize.summarize_with_steps(demo_trace)
    truth = {s["step"]: s["modules"] for s in steps.per_step_from(times)}
    kept = list(source.live.step_self)[:-1]  # the last step read waits for late time
    assert kept == list(range(1, 11))
    checked = 0
    for fqn in ("TinyTransformer", "TinyTransformer.layers.0.attn.qkv", "TinyTransformer.head"):
        for index, phase in enumerate(("forward", "backward")):
            mine = rows[fqn].steps[phase]
            assert len(mine) == len(kept)
            for ns, number in zip(mine, kept):
                assert ns / 1e6 == pytest.approx(truth[number][fqn][index], abs=1e-5), (
                    fqn,
                    phase,
                    number,
                )
                checked += ns > 0
            assert rows[fqn].step_median(phase) > 0
        # cpu/st: the module's thread CPU time (all phases, with its submodules) per step, the
        # summary's per-step CPU times (step_self_cpu_ms, per kept step) added up the same way
        at = summary["steps"]["kept"].index  # the summary also keeps the last step
        own = [
            sum(
                m["step_self_cpu_ms"][at(number)]
                for f, m in summary["modules"].items()
                if f == fqn or f.startswith(fqn + ".")
            )
            for number in kept
        ]
        assert [ns / 1e6 for ns in rows[fqn].steps[CPU]] == pytest.approx(own, abs=1e-4), fqn
        assert min(own) > 0
    assert checked == 3 * 2 * len(kept)
    if engine == "native":  # what `top --once` prints (a user's check on a finished run)
        pytest.importorskip("rich")
        env = {k: v for k, v in os.environ.items() if k != "FQNTRACE"}
        proc = subprocess.run(
            [sys.executable, "-m", "fqntrace", "top", "--once", demo_trace],
            env={**env, "COLUMNS": "150"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        header = next(line for line in proc.stdout.splitlines() if "fwd/st" in line)
        assert header.split()[-3:] == ["fwd/st", "bwd/st", "cpu/st"]
        for line in proc.stdout.splitlines():
            if re.search(r"\b(TinyTransformer|qkv|head)\s", line):
                assert "-" not in line.split()[-3:], line


def test_a_tail_longer_than_the_end_marks_window_is_read_whole(demo_trace, tmp_path):
    """The follower looks for the tail only near the end of what it read (find_end_mark): a tail
    that starts further back (here a Chrome tail padded to 200 KB, read in one 2 MiB chunk)
    goes with the events to the engine, which declines the block, and the general path reads
    it. The same rows as the trace without the padding, and the tail is read."""
    text = open(demo_trace).read()
    assert text.endswith("}}\n") or text.endswith("}}")
    padded = tmp_path / "padded.json"
    padded.write_text(text.rstrip()[:-1] + ', "pad": "' + "x" * 200_000 + '"}\n')
    _, plain = read_top(demo_trace)
    source, long = read_top(padded)
    assert source.follower.tail is not None and source.follower.state == "ended"
    assert {f: (r.total, r.steps) for f, r in long.items()} == {
        f: (r.total, r.steps) for f, r in plain.items()
    }


def test_top_follows_a_running_job_and_q_quits(pane, tmp_path):
    path = tmp_path / "live.json"
    job = train(path, seconds=10)
    try:
        name = pane(str(path), "--interval", "0.5", "--window", "5")
        first = wait_for(name, lambda t: (root_sum_fwd(t) or 0) > 0, what="the Net row")
        for module in ("enc", "dec", "fc1", "fc2", "Global"):
            assert re.search(rf"^\s*[-+ ]*\s*{module}\s", first, re.M), (module, first)
        assert "steps/s" in first and "fqntrace top" in first
        before = root_sum_fwd(first)
        later = wait_for(
            name,
            lambda t: (root_sum_fwd(t) or 0) > before,
            timeout=30,
            what="Net's forward time advancing",
        )
        steps = re.search(r"steps/s (\d+\.\d+)", later)
        assert steps and float(steps.group(1)) > 0, later
        # s changes the order; Enter on the selected (root) row collapses it, + expands all
        tmux("send-keys", "-t", name, "s")
        wait_for(name, lambda t: "sort recent" in t, timeout=10, what="sort recent")
        tmux("send-keys", "-t", name, "Enter")
        collapsed = wait_for(
            name,
            lambda t: re.search(r"^\s*\+ Net\s", t, re.M) is not None,
            timeout=10,
            what="Net collapsed",
        )
        assert not re.search(r"^\s+[-+ ]*\s*fc1\s", collapsed, re.M)
        tmux("send-keys", "-t", name, "+")
        wait_for(
            name,
            lambda t: re.search(r"^\s*- Net\s", t, re.M) is not None,
            timeout=10,
            what="Net expanded",
        )
        tmux("send-keys", "-t", name, "q")
        wait_for(name, lambda t: "TOP-EXITED 0" in t, timeout=10, what="top quitting on q")
    finally:
        job.kill()
        job.wait()


def test_top_waits_for_a_file_not_created_yet(pane, tmp_path):
    path = tmp_path / "later.json"
    name = pane(str(path), "--interval", "0.5")
    # The message names the whole path, which the pane's width may wrap anywhere.
    wait_for(
        name,
        lambda t: "waiting for" in t and "later.json" in t.replace("\n", ""),
        timeout=30,
        what="the waiting message",
    )
    job = train(path, seconds=6)
    try:
        text = wait_for(
            name, lambda t: (root_sum_fwd(t) or 0) > 0, what="rows once the file appears"
        )
        assert "waiting for" not in text
    finally:
        job.kill()
        job.wait()
    tmux("send-keys", "-t", name, "q")
    wait_for(name, lambda t: "TOP-EXITED 0" in t, timeout=10, what="top quitting on q")


def test_top_without_rich_says_how_to_install(tmp_path):
    fake = tmp_path / "rich"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no rich here')\n")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "fqntrace", "top", str(tmp_path / "x.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "pip install 'fqntrace[top]'" in proc.stderr
