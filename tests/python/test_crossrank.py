"""`summary` over several ranks' traces: per module and phase the median, the maximum and the
slowest rank, comm time per rank, and the straggler, from a torchrun job where rank 1 does extra
matmuls inside one module (tests/python/dist_scripts/straggler.py)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import cli

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "dist_scripts", "straggler.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
TORCH_EXIT_ABORT = "terminate called without an active exception"

pytestmark = pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="torchrun not in this venv")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """run.0.json and run.1.json of a 2-rank DDP job whose rank 1 straggles in `slow`."""
    folder = str(tmp_path_factory.mktemp("straggler"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FQNTRACE", "TORCHELASTIC", "MASTER_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    env.update({"FQNTRACE": os.path.join(folder, "run.{rank}.json"), "OMP_NUM_THREADS": "1"})
    for attempt in range(2):
        proc = subprocess.run(
            [TORCHRUN, "--standalone", "--nproc_per_node=2", SCRIPT, "--extra", "20"],
            env=env,
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=180,
        )
        if proc.returncode != 0 and TORCH_EXIT_ABORT in proc.stdout and attempt == 0:
            for name in os.listdir(folder):  # torch's exit race (see train.py), not ours
                os.remove(os.path.join(folder, name))
            continue
        break
    assert proc.returncode == 0, proc.stdout[-3000:]
    return folder


def slow_fqn(result):
    return next(f for f in result["modules"] if f.endswith(".slow"))


def test_cross_rank_json_names_the_straggling_module_and_rank(ranks):
    proc = cli("summary", os.path.join(ranks, "run.*.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ranks"] == [0, 1] and result["complete"] is True
    slow = slow_fqn(result)
    fwd = result["modules"][slow]["forward"]
    # rank 1's extra matmuls are op time of `slow` (its own, not a submodule's) on rank 1 only
    assert fwd["slowest_rank"] == 1 and fwd["self_slowest_rank"] == 1
    assert fwd["ranks"]["1"]["self_ms"] > 3 * fwd["ranks"]["0"]["self_ms"]
    assert fwd["max_ms"] == fwd["ranks"]["1"]["total_ms"]
    assert fwd["median_ms"] == pytest.approx(
        (fwd["ranks"]["0"]["total_ms"] + fwd["ranks"]["1"]["total_ms"]) / 2, abs=1e-5
    )
    assert result["straggler"]["module"] == slow and result["straggler"]["rank"] == 1
    assert result["straggler"]["phase"] == "forward"
    # Each rank's numbers are that rank's own summary.
    for rank in (0, 1):
        one = json.loads(cli("summary", os.path.join(ranks, f"run.{rank}.json"), "--json").stdout)
        for fqn, entry in one["modules"].items():
            for phase in ("forward", "backward"):
                cell = result["modules"][fqn][phase]["ranks"][str(rank)]
                assert cell["total_ms"] == entry[phase]["total_ms"]
                assert cell["comm_ms"] == entry[phase]["comm_ms"]
    # DDP's all-reduces: gloo's work time lands on modules, on both ranks.
    for rank in ("0", "1"):
        assert (
            sum(
                m[p]["comm_ms"][rank]
                for m in result["modules"].values()
                for p in ("forward", "backward", "recompute")
            )
            > 0
        )


def test_cross_rank_table_shows_median_max_slowest_and_comm(ranks):
    proc = cli("summary", os.path.join(ranks, "run.0.json"), os.path.join(ranks, "run.1.json"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("2 ranks (0, 1)")
    assert lines[1].startswith("straggler: rank 1 in ") and ".slow (forward)" in lines[1]
    header = next(line for line in lines if line.startswith("module"))
    for column in ("fwd med", "fwd max", "bwd med", "bwd max", "slowest", "comm r0", "comm r1"):
        assert column in header
    slow_row = next(line for line in lines if line.strip().startswith("slow "))
    assert "r1 fwd +" in slow_row
    assert all(len(line) <= 100 for line in lines)


def test_parallel_and_serial_reading_agree_and_ranks_fall_back_to_order(ranks, tmp_path):
    paths = [os.path.join(ranks, f"run.{r}.json") for r in (0, 1)]
    serial = cli("summary", *paths, "--json", "--jobs", "1")
    parallel = cli("summary", *paths, "--json", "--jobs", "2")
    assert serial.returncode == 0 and serial.stdout == parallel.stdout
    # The same rank twice: numbered by position, with a note.
    copy = tmp_path / "copy.json"
    shutil.copy(paths[0], copy)
    proc = cli("summary", paths[0], str(copy), "--json")
    assert proc.returncode == 0 and "do not name distinct ranks" in proc.stderr
    result = json.loads(proc.stdout)
    assert result["ranks"] == [0, 1] and result["straggler"] is None
    # A pattern also matching a rank's .summary.json reads the traces only.
    for r in (0, 1):
        shutil.copy(paths[r], tmp_path / f"run.{r}.json")
    (tmp_path / "run.0.summary.json").write_text(serial.stdout)
    proc = cli("summary", str(tmp_path / "run.*.json"), "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["ranks"] == [0, 1]
    # A pattern that matches nothing is one line.
    proc = cli("summary", str(tmp_path / "nothing.*.json"), paths[0])
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "no such file" in proc.stderr
