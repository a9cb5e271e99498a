"""bench/'s own rules, checked without running a benchmark: the A/B harness's block order and
comparisons (hand-computed), bench/measured.json's layout, and the opening table's rule that a
row measured before its code last changed is shown below it."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import ab  # noqa: E402
import costs  # noqa: E402
import measured  # noqa: E402


def test_ab_runs_arm_b_in_the_middle_blocks_of_every_four():
    order = [b for b, _ in ab.run(8, lambda b: [])]
    assert order == [False, True, True, False, False, True, True, False]


def test_ab_compares_within_each_group_of_four():
    # Group 1: A 10, 10; B 11, 11 -> +10 %. Group 2: A 20, 22; B 21, 21 -> 21/21 = 0 %.
    blocks = [
        (False, [10.0]),
        (True, [11.0]),
        (True, [11.0]),
        (False, [10.0]),
        (False, [20.0]),
        (True, [21.0]),
        (True, [21.0]),
        (False, [22.0]),
    ]
    assert ab.arms(blocks) == ([10.0, 10.0, 20.0, 22.0], [11.0, 11.0, 21.0, 21.0])
    assert [round(x, 6) for x in ab.group_changes(blocks)] == [10.0, 0.0]
    assert [round(x, 6) for x in ab.null_changes(blocks)] == [0.0, 10.0]  # 22 against 20


def test_measured_json_keeps_one_record_a_line_and_no_raw_samples():
    value = {
        "p": {
            "run": {"date": "d", "loadavg": [1.0, 2.0]},
            "raw": [[1, 2]],
            "rows": [{"a": 1}, {"a": 2, "raw_x": [3]}],
        }
    }
    kept = measured.without_raw(value)
    assert kept == {
        "p": {"run": {"date": "d", "loadavg": [1.0, 2.0]}, "rows": [{"a": 1}, {"a": 2}]}
    }
    text = measured.dumps(kept)
    assert json.loads(text) == kept
    assert '  "run": {"date": "d", "loadavg": [1.0, 2.0]},' in text.splitlines()


def test_a_row_measured_before_its_code_changed_goes_below_the_table():
    changed = costs.code_changed("tracer")
    before = (changed.replace(year=changed.year - 1)).isoformat()
    after = (changed.replace(year=changed.year + 1)).isoformat()
    p6 = {
        "running": False,
        "global_callbacks": False,
        "added_ns": 1.0,
        "noise_ns": 5.0,
        "within_noise": True,
    }

    def results(date):
        return {
            "p1": {
                "run": {"date": date},
                "summary": {
                    "ops": {
                        m: {"added_ns": 1.0, "best_added_ns": 1.0}
                        for m in ("fqntrace", "empty", "profiler", "profiler_stack")
                    },
                    "mlp": {m: {"slowdown_pct": 1.0} for m in ("fqntrace", "empty")},
                    "targets": {
                        k: {"value": 1.0, "met": True}
                        for k in ("ops_vs_empty", "ops_vs_profiler", "mlp_vs_empty")
                    },
                    "ratios": {},
                    "p6": p6,
                },
            }
        }

    fresh, stale = costs.cost_rows(results(after))
    assert any("P6" in r for r in fresh) and not any("P6" in r for r in stale)
    fresh, stale = costs.cost_rows(results(before))
    assert any("P6" in r for r in stale) and not any("P6" in r for r in fresh)


def test_a_layout_or_comment_commit_named_in_the_ignore_list_leaves_the_code_unchanged(monkeypatch):
    newest = subprocess.run(
        [
            "git",
            "-C",
            costs.ROOT,
            "log",
            "--no-merges",
            "-2",
            "--format=%H",
            "--",
            *costs.CODE["cli"],
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    changed = costs.code_changed("cli")
    monkeypatch.setattr(costs, "ignored_revisions", lambda: {newest[0]})
    costs.code_changed.cache_clear()  # the document asks once per code; here the list changed
    older = costs.code_changed("cli")
    costs.code_changed.cache_clear()
    assert older <= changed
    shown = subprocess.run(
        ["git", "-C", costs.ROOT, "log", "-1", "--format=%cI", newest[1]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert older.isoformat() == shown
