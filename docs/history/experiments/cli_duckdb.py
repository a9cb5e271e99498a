"""DuckDB beside `python -m fqntrace summary` (once an optional row of bench/cli_bench.py's P9
table, kept here as the command behind the DuckDB rows of docs/history/benchmarks-2026-11.md):
DuckDB answers a simpler per-module question on the same JSON Lines trace (op time, all ops, no
nesting rule, and count per fqn and phase), a lower bound of the work `summary` does, for scale.

    .venv/bin/python docs/history/experiments/cli_duckdb.py TRACE.jsonl

TRACE.jsonl: a big JSON Lines trace (`tests/python/bigtrace.py traces/demo.json OUT.jsonl 300`).
Prints one row as bench/cli_bench.py does: CPU s (user + sys), events per CPU second, peak RSS.
Needs `pip install duckdb` (never a dependency of fqntrace).
"""

import os
import subprocess
import sys

# bench/cli_bench.py's rusage wrapper (measure) and terminal line, from here.
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench")
)
from cli_bench import line, measure  # noqa: E402

DUCK_QUERY = """
SELECT args.fqn AS fqn, args.phase AS phase, sum(dur) AS us, count(*) AS ops
FROM read_json('{path}', format='newline_delimited', union_by_name=true, sample_size=-1,
               ignore_errors=true)
WHERE ph = 'X' AND cat = 'cpu_op'
GROUP BY ALL
"""


def duckdb_row(path, n_events):
    """DuckDB on the JSON Lines file: op time (all ops, no nesting rule) and count per module
    and phase."""
    code = (
        "import duckdb,sys;"
        f"r=duckdb.sql({DUCK_QUERY!r}.format(path=sys.argv[1])).fetchall();"
        "print(len(r))"
    )
    rc, cpu, sys_s, rss, wall, out, err = measure(
        [sys.executable, "-c", code, path], dict(os.environ)
    )
    if rc != 0:
        sys.exit(f"duckdb: failed ({err.strip().splitlines()[-1] if err.strip() else rc})")
    version = subprocess.run(
        [sys.executable, "-c", "import duckdb; print(duckdb.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "verb": f"DuckDB {version} (per fqn and phase: sum of op dur, count; no nesting rule)",
        "format": "JSON Lines",
        "events": n_events,
        "cpu_s": cpu,
        "sys_s": sys_s,
        "events_per_cpu_s": n_events / cpu,
        "peak_rss_mib": rss,
        "wall_s": wall,
        "target": None,
        "met": None,
        "status": "",
        "command": "duckdb read_json(...) GROUP BY fqn, phase",
    }


def main():
    path = sys.argv[1]
    with open(path, "rb") as f:  # one event a line, but the header and the tail
        events = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b"")) - 2
    print(line(duckdb_row(path, events)))


if __name__ == "__main__":
    main()
