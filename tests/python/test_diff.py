"""`python -m fqntrace diff BASE NEW` on real runs: the same model twice, the second with an extra
matmul in one block; a different model; summaries; bad inputs."""

import json
import os

import pytest
from conftest import cli as fqntrace_cli
from fqntrace.analysis import diff, diff_table, summarize
from slow_block import SLOW_BLOCK, Net, Other, train

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff")
    return {
        "base": train(Net(), folder / "base.json", formats="summary"),
        "slow": train(Net(slow_block=2), folder / "slow.json", formats="summary"),
        "other": train(Other(), folder / "other.json"),
        "folder": folder,
    }


def one_line(stderr):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("fqntrace: ")
    return lines[0]


def test_diff_ranks_the_block_with_the_extra_matmul_first(runs):
    proc = fqntrace_cli("diff", runs["base"], runs["slow"], "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    first = result["rows"][0]
    assert first["fqn"] == SLOW_BLOCK
    assert first["status"] == "both"
    assert first["self_change_ms"] > 0 and first["self_change_pct"] > 0
    # Its parent's total grew by the same matmul but its own ops did not: it is not first.
    parent = next(r for r in result["rows"] if r["fqn"] == "Net.blocks")
    assert parent["self_change_ms"] == 0 and parent["total_change_ms"] > 0
    assert result["rows"].index(parent) > 0
    # Rows are ordered by |change of self time| and name every module of both runs by full fqn.
    changes = [abs(r["self_change_ms"]) for r in result["rows"]]
    assert changes == sorted(changes, reverse=True)
    traced = set(summarize.load_for_summary(runs["base"])["modules"])
    assert traced <= {r["fqn"] for r in result["rows"]}
    # The text table says the same: the slow block is the first row.
    text = fqntrace_cli("diff", runs["base"], runs["slow"])
    assert text.returncode == 0, text.stderr
    body = text.stdout.splitlines()
    rule = next(i for i, line in enumerate(body) if line.startswith("---"))
    assert body[rule + 1].split()[-1] == SLOW_BLOCK


def test_diff_reads_the_summaries_the_core_writes(runs):
    # <stem>.summary.json, written at each run's end from its trace (FQNTRACE_FORMATS=summary).
    folder = runs["folder"]
    proc = fqntrace_cli(
        "diff", folder / "base.summary.json", folder / "slow.summary.json", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert rows[0]["fqn"] == SLOW_BLOCK
    # Containers the exporter does not write (the ModuleList) still get a row, and a trace on
    # one side with a summary on the other compares the same modules.
    assert "Net.blocks" in {r["fqn"] for r in rows}
    mixed = fqntrace_cli("diff", runs["base"], folder / "slow.summary.json", "--json")
    assert mixed.returncode == 0, mixed.stderr
    assert {r["fqn"] for r in json.loads(mixed.stdout)["rows"]} == {r["fqn"] for r in rows}
    assert all(r["status"] == "both" for r in rows)


def test_threshold_exit_codes(runs):
    # Runs without training steps: one note says there is no test, then the totals rule.
    over = fqntrace_cli("diff", runs["base"], runs["slow"], "--threshold", "50")
    assert over.returncode == diff.EXIT_REGRESSION
    note, verdict = over.stderr.strip().splitlines()
    assert note.startswith("fqntrace: note: ") and "without a significance test" in note
    assert verdict.startswith("fqntrace: ") and SLOW_BLOCK in verdict
    assert "over threshold" in over.stdout
    # The same run against itself never regresses, even at threshold 0.
    same = fqntrace_cli("diff", runs["base"], runs["base"], "--threshold", "0")
    assert same.returncode == 0, same.stderr
    # A threshold the change stays under, and a minimum size no module reaches: exit 0.
    assert fqntrace_cli("diff", runs["base"], runs["slow"], "--threshold", "1e9").returncode == 0
    small = fqntrace_cli(
        "diff", runs["base"], runs["slow"], "--threshold", "50", "--min-share", "100"
    )
    assert small.returncode == 0, small.stderr
    assert fqntrace_cli("diff", runs["base"], runs["slow"], "--threshold", "-3").returncode == 2


def test_modules_on_one_side_are_listed_and_summaries_work(runs):
    folder = runs["folder"]
    base = summarize.load_for_summary(runs["base"])
    new = summarize.load_for_summary(runs["slow"])
    del base["modules"]["Net.head"]  # as if the head were added in NEW
    new["modules"].pop("Net.blocks.3.fc2")  # and fc2 of the last block removed
    base_path = folder / "edited-base.summary.json"
    new_path = folder / "edited-new.summary.json"
    base_path.write_text(json.dumps(base))
    new_path.write_text(json.dumps(new))
    proc = fqntrace_cli("diff", base_path, new_path, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["fqn"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows["Net.head"]["status"] == "new_only" and rows["Net.head"]["base"] is None
    assert rows["Net.blocks.3.fc2"]["status"] == "base_only"
    assert rows["Net.blocks.3.fc2"]["new"] is None
    assert rows[SLOW_BLOCK]["status"] == "both"
    text = fqntrace_cli("diff", base_path, new_path, "--all")
    assert "Net.head  (only in new)" in text.stdout
    assert "Net.blocks.3.fc2  (only in base)" in text.stdout


def test_bad_inputs_give_one_line_and_non_zero_exit(runs, tmp_path):
    not_json = tmp_path / "notes.json"
    not_json.write_text("hello, this is not a trace\n")
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2, 3]\n")
    for bad in (not_json, a_list, tmp_path / "missing.json"):
        proc = fqntrace_cli("diff", runs["base"], bad)
        assert proc.returncode == 1, proc.stdout
        assert str(bad) in one_line(proc.stderr)
        assert proc.stdout == ""
    different = fqntrace_cli("diff", runs["base"], runs["other"])
    assert different.returncode == 1
    assert "different models" in one_line(different.stderr)
    usage = fqntrace_cli("diff", runs["base"])
    assert usage.returncode == 2
    one_line(usage.stderr)


# ---------------------------------------------------------------------------------------------
# The statistical gate on summaries with per-step samples (the shape summarize writes).


def step_summary(samples, name="run.json"):
    """A summary with steps: per module its own time in each kept step (forward only)."""
    n = len(next(iter(samples.values())))
    modules = {}
    for fqn, values in samples.items():
        median = (
            sorted(values)[n // 2] if n % 2 else sum(sorted(values)[n // 2 - 1 : n // 2 + 1]) / 2
        )
        phase = {
            "self_ms": sum(values),
            "total_ms": sum(values),
            "step_median_ms": median,
            "step_self_median_ms": median,
            "ops": n,
            "flops": 0,
        }
        modules[fqn] = {
            "module_type": "M",
            "calls": n,
            "forward": phase,
            "backward": {},
            "recompute": {},
            "step_self_ms": list(values),
        }
    op = [sum(v[k] for v in samples.values()) for k in range(n)]
    return {
        "trace": name,
        "modules": modules,
        "steps": {
            "count": n,
            "recorded": n + 1,
            "excluded": [0],
            "kept": list(range(1, n + 1)),
            "median_op_ms": sorted(op)[n // 2],
            "per_step": [{"step": k + 1, "op_ms": op[k], "excluded": False} for k in range(n)],
        },
    }


STEADY = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.03, 0.97, 1.00, 1.02]
# A module whose median is up 20 % but whose steps swing from 1 to 9 ms on both sides.
NOISY_BASE = [1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0, 5.5, 4.5, 5.2]
NOISY_NEW = [1.2, 9.1, 2.1, 8.5, 3.5, 7.2, 6.4, 6.6, 6.0, 6.1, 4.0, 9.9]


def test_only_a_significant_slowdown_fails_the_gate_and_ranks_first():
    base = step_summary({"Net.steady": STEADY, "Net.noisy": NOISY_BASE})
    new = step_summary({"Net.steady": [v * 1.06 for v in STEADY], "Net.noisy": NOISY_NEW})
    result = diff.compare(base, new, threshold=3)
    assert result["mode"] == "test" and result["note"] is None
    rows = {r["fqn"]: r for r in result["rows"]}
    steady, noisy = rows["Net.steady"], rows["Net.noisy"]
    assert steady["significant"] and steady["p_value"] < 0.001
    assert steady["change_pct"] == pytest.approx(6.0, abs=0.5)
    assert 3 < steady["interval_pct"][0] < 5 and 6.5 < steady["interval_pct"][1] < 8.5
    # The noisy module moved more, in ms and in %, but not significantly: listed after, no gate.
    assert noisy["self_change_ms"] > 10 * steady["self_change_ms"]
    assert noisy["change_pct"] > 5 and not noisy["significant"] and noisy["p_value"] > 0.05
    assert result["rows"][0]["fqn"] == "Net.steady"
    assert result["regressions"] == ["Net.steady"]
    assert (steady["verdict"], noisy["verdict"]) == ("slower", "same")
    text = "\n".join(diff_table.render(result))
    assert "Net.noisy  (not significantly over 3%)" in text
    assert "Net.steady  << over threshold" in text
    assert "1 module(s) slower by more than 3% (the whole 95% interval above it)" in text
    # A stricter level widens the interval (to below 3%): the gate then asks for less.
    strict = diff.compare(base, new, threshold=3, alpha=0.001)
    assert strict["rows"][0]["interval_pct"][0] < 3 and strict["regressions"] == []
    assert diff.compare(base, new, threshold=2, alpha=0.001)["regressions"] == ["Net.steady"]
    # Its estimate (+6%) is over 5%, but its interval reaches below 5%: not a regression.
    at_five = diff.compare(base, new, threshold=5)
    assert at_five["regressions"] == []
    assert "Net.steady  (not significantly over 5%)" in "\n".join(diff_table.render(at_five))
    assert diff.compare(base, new, threshold=10)["regressions"] == []


def test_rows_rank_by_the_change_they_surely_made_not_by_the_estimate():
    # Net.tiny (0.03 ms) has wild steps in NEW: its median is up 100x, its interval reaches
    # down to a small fraction of a ms. Net.big (2 ms) is 30 % slower in every step: a smaller
    # estimate, a narrow interval far from zero. The one that surely moved more ranks first.
    base = step_summary(
        {
            "Net.big": [2 * v for v in STEADY],
            "Net.tiny": [0.03 * v for v in STEADY],
            "Net.rest": [5 * v for v in STEADY],
        }
    )
    wild = [0.03, 0.04, 9.0, 0.05, 6.0, 7.5, 0.03, 8.0, 5.0, 6.5, 4.0, 9.5]
    new = step_summary(
        {
            "Net.big": [2.6 * v for v in STEADY],
            "Net.tiny": wild,
            "Net.rest": [5 * v for v in STEADY],
        }
    )
    result = diff.compare(base, new, threshold=10, absolute=True)
    rows = {r["fqn"]: r for r in result["rows"]}
    big, tiny = rows["Net.big"], rows["Net.tiny"]
    assert big["significant"] and tiny["significant"]
    assert tiny["change_ms"] > 5 * big["change_ms"]  # the estimate alone would rank tiny first
    assert 0 < tiny["evidence_ms"] < 0.1 < 0.4 < big["evidence_ms"]
    assert big["evidence_ms"] == big["interval_ms"][0]
    assert [r["fqn"] for r in result["rows"][:2]] == ["Net.big", "Net.tiny"]
    assert result["regressions"][0] == "Net.big"
    assert rows["Net.rest"]["evidence_ms"] == 0


def test_identical_samples_never_fail_the_gate():
    same = step_summary({"Net.a": STEADY, "Net.b": NOISY_BASE})
    result = diff.compare(same, json.loads(json.dumps(same)), threshold=0)
    assert result["regressions"] == []
    assert all(
        r["p_value"] == 1.0 and r["change_ms"] == 0
        for r in result["rows"]
        if r["p_value"] is not None
    )


def test_too_few_steps_give_one_note_and_the_median_rule(tmp_path):
    base = step_summary({"Net.a": STEADY[:3]})
    new = step_summary({"Net.a": [v * 1.5 for v in STEADY[:3]]})
    result = diff.compare(base, new, threshold=10)
    assert result["mode"] == "median" and "fewer than 5" in result["note"]
    assert result["rows"][0]["p_value"] is None and result["regressions"] == ["Net.a"]
    (tmp_path / "base.summary.json").write_text(json.dumps(base))
    (tmp_path / "new.summary.json").write_text(json.dumps(new))
    proc = fqntrace_cli(
        "diff", tmp_path / "base.summary.json", tmp_path / "new.summary.json", "--threshold", "10"
    )
    assert proc.returncode == diff.EXIT_REGRESSION
    notes = [line for line in proc.stderr.splitlines() if line.startswith("fqntrace: note: ")]
    assert len(notes) == 1 and "fewer than 5" in notes[0]
    assert "note: " in proc.stdout  # the text says it too
    # --totals compares whole-run totals, whatever the steps.
    assert diff.compare(base, new, totals=True)["mode"] == "totals"
    bad = fqntrace_cli(
        "diff", tmp_path / "base.summary.json", tmp_path / "new.summary.json", "--alpha", "2"
    )
    assert bad.returncode == 2
    one_line(bad.stderr)


def test_a_machine_running_slower_as_a_whole_is_no_regression_of_every_module():
    # Five modules; in NEW every step runs 25 % slower (a loaded machine, a lower clock): each
    # module's time at BASE's speed is unchanged, and only the step line says the machine was
    # slower. --absolute compares plain ms and fails them all.
    names = ["Net.a", "Net.b", "Net.c", "Net.d", "Net.e"]
    wobble = [1.00, 1.04, 0.97, 1.02, 0.99, 1.03, 0.96, 1.01, 1.00, 0.98, 1.05, 0.995]
    base = step_summary({f: [(i + 1) * w for w in wobble] for i, f in enumerate(names)})
    slower = step_summary(
        {f: [1.25 * (i + 1) * w for w in wobble[::-1]] for i, f in enumerate(names)}
    )
    result = diff.compare(base, slower, threshold=10)
    assert result["measure"] == "speed_corrected"
    assert result["regressions"] == []
    assert all(abs(r["change_pct"]) < 1 for r in result["rows"] if r["p_value"] is not None)
    assert result["step"]["change_pct"] == pytest.approx(25, abs=3)
    assert result["step"]["significant"]
    assert sorted(diff.compare(base, slower, threshold=10, absolute=True)["regressions"]) == names
    # One module's own code 30 % slower on the slower machine: that one, by about 30 %.
    hot = step_summary(
        {
            f: [1.25 * (i + 1) * w * (1.3 if f == "Net.c" else 1) for w in wobble[::-1]]
            for i, f in enumerate(names)
        }
    )
    result = diff.compare(base, hot, threshold=10)
    assert result["regressions"] == ["Net.c"] and result["rows"][0]["fqn"] == "Net.c"
    assert result["rows"][0]["change_pct"] == pytest.approx(30, abs=3)
