"""The CLI on big traces: CPU time (user + sys), events per CPU second and peak RSS of every verb
of `python -m fqntrace`, on a Chrome trace and a JSON Lines trace of the same events, and DuckDB
answering a per-module question on the same JSON Lines file when it is installed (an optional
comparison, never a dependency).

    python bench/cli_bench.py SOURCE.json --mb 300 [--out DIR] [--pythonpath DIR] [--verbs ...]

SOURCE is a trace the core wrote (scripts/demo.sh's traces/demo.json); the big traces are made
from it by tests/python/bigtrace.py. --pythonpath runs another checkout's package (a "before"
measurement). Prints a Markdown table and writes it (and the commands) to OUT/cli_bench.md.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import bigtrace  # noqa: E402


def measure(cmd, env):
    """Runs cmd as the only child of a fresh `time`-like wrapper so its rusage is its own."""
    wrapper = [sys.executable, "-c", (
        "import os,resource,subprocess,sys,json;"
        "p=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE,stderr=subprocess.PIPE);"
        "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(json.dumps([p.returncode,u.ru_utime+u.ru_stime,u.ru_maxrss/1024,"
        "p.stdout.decode()[-2000:],p.stderr.decode()[-2000:]]))")] + cmd
    started = time.perf_counter()
    done = subprocess.run(wrapper, stdout=subprocess.PIPE, env=env, check=True)
    wall = time.perf_counter() - started
    rc, cpu, rss, out, err = json.loads(done.stdout)
    return rc, cpu, rss, wall, out, err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("--mb", type=float, default=300)
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "cli_bench"))
    parser.add_argument("--pythonpath", help="the fqntrace package's parent folder to run")
    parser.add_argument("--verbs", nargs="*", default=None)
    parser.add_argument("--label", default="this checkout")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mb = int(args.mb) if args.mb == int(args.mb) else args.mb
    chrome = os.path.join(args.out, f"big{mb}.json")
    chrome1 = os.path.join(args.out, f"big{mb}.rank1.json")
    jsonl = os.path.join(args.out, f"big{mb}.jsonl")
    counts = {}
    for path, rank in ((chrome, None), (chrome1, 1), (jsonl, None)):
        if not os.path.exists(path):
            counts[path] = bigtrace.make(args.source, path, args.mb, rank)[0]
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    py = [sys.executable, "-m", "fqntrace"]

    def events(path):
        """Events in a big trace: its lines but the header and the tail (one event a line)."""
        if path not in counts:
            with open(path, "rb") as f:
                counts[path] = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24),
                                                                        b"")) - 2
        return counts[path]

    cut_at = 0.72
    cuts = {}
    for path in (chrome, jsonl):
        cut = path.replace("big", "cut", 1)
        if not os.path.exists(cut):
            with open(path, "rb") as src, open(cut + ".orig", "wb") as dst:
                left = int(os.path.getsize(path) * cut_at)
                while left > 0:
                    data = src.read(min(left, 1 << 24))
                    dst.write(data)
                    left -= len(data)
        cuts[path] = cut
    html = os.path.join(args.out, "report.html")
    merged = os.path.join(args.out, "merged.json")
    plan = [
        ("summary", chrome, lambda p: ["summary", p], lambda p: events(p)),
        ("summary", jsonl, lambda p: ["summary", p], lambda p: events(p)),
        ("validate", chrome, lambda p: ["validate", p], lambda p: events(p)),
        ("validate", jsonl, lambda p: ["validate", p], lambda p: events(p)),
        ("repair", chrome, lambda p: ["repair", cuts[p], "-o", cuts[p] + ".fixed"],
         lambda p: int(events(p) * cut_at)),
        ("repair", jsonl, lambda p: ["repair", cuts[p], "-o", cuts[p] + ".fixed"],
         lambda p: int(events(p) * cut_at)),
        ("report", chrome, lambda p: ["report", p, "-o", html], lambda p: events(p)),
        ("report", jsonl, lambda p: ["report", p, "-o", html], lambda p: events(p)),
        ("merge", chrome, lambda p: ["merge", p, chrome1, "-o", merged],
         lambda p: events(p) + events(chrome1)),
        ("diff", chrome, lambda p: ["diff", p, chrome1], lambda p: events(p) + events(chrome1)),
        ("top --once", chrome, lambda p: ["top", "--once", p], lambda p: events(p)),
        ("top --once", jsonl, lambda p: ["top", "--once", p], lambda p: events(p)),
    ]
    rows = []
    for verb, path, argv, n in plan:
        if args.verbs and verb.split()[0] not in args.verbs:
            continue
        if verb == "repair":
            shutil.copyfile(cuts[path] + ".orig", cuts[path])
        cmd = py + argv(path)
        rc, cpu, rss, wall, out, err = measure(cmd, env)
        n_events = n(path)
        rate = n_events / cpu if cpu > 0 and n_events else 0
        fmt = "JSON Lines" if path.endswith(".jsonl") else "Chrome"
        status = "" if rc in (0, 3) else f" (exit {rc}: {err.strip()[-200:]})"
        rows.append((verb, fmt, n_events, cpu, rate, rss, wall, status,
                     "python -m fqntrace " + " ".join(os.path.basename(a) if os.sep in a else a
                                                       for a in argv(path))))
        print(f"{verb:11} {fmt:10} {n_events:>9} ev {cpu:7.1f} s CPU {rate / 1e3:7.0f} k ev/CPU-s "
              f"{rss:7.0f} MiB {wall:6.0f} s wall{status}", flush=True)
    duck = duckdb_row(jsonl, events(jsonl))
    if duck:
        rows.append(duck)
        print(f"{duck[0]:11} {duck[1]:10} {duck[2]:>9} ev {duck[3]:7.1f} s CPU "
              f"{duck[4] / 1e3:7.0f} k ev/CPU-s {duck[5]:7.0f} MiB {duck[6]:6.0f} s wall")
    lines = [f"Package: {args.label}. Traces: {os.path.getsize(chrome) / (1 << 20):.0f} MiB "
             f"Chrome / {os.path.getsize(jsonl) / (1 << 20):.0f} MiB JSON Lines "
             f"(`tests/python/bigtrace.py {os.path.basename(args.source)} OUT {mb}`).", "",
             "| verb | format | events | CPU s | events / CPU-s | peak RSS MiB | wall s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for verb, fmt, n_events, cpu, rate, rss, wall, status, _ in rows:
        lines.append(f"| `{verb}` | {fmt} | {n_events:,} | {cpu:.1f} | {rate / 1e3:,.0f} k | "
                     f"{rss:.0f} | {wall:.0f}{status} |")
    with open(os.path.join(args.out, "cli_bench.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


DUCK_QUERY = """
SELECT args.fqn AS fqn, args.phase AS phase, sum(dur) AS us, count(*) AS ops
FROM read_json('{path}', format='newline_delimited', union_by_name=true, sample_size=-1,
               ignore_errors=true)
WHERE ph = 'X' AND cat = 'cpu_op'
GROUP BY ALL
"""


def duckdb_row(path, n_events):
    """DuckDB on the JSON Lines file: op time (all ops, no nesting rule) and count per module
    and phase. A lower bound of the work `summary` does, for scale."""
    code = ("import duckdb,sys;"
            f"r=duckdb.sql({DUCK_QUERY!r}.format(path=sys.argv[1])).fetchall();"
            "print(len(r))")
    rc, cpu, rss, wall, out, err = measure([sys.executable, "-c", code, path], dict(os.environ))
    if rc != 0:
        print(f"duckdb: skipped ({err.strip().splitlines()[-1] if err.strip() else rc})")
        return None
    return ("DuckDB (per fqn and phase: sum of op dur, count)", "JSON Lines", n_events, cpu,
            n_events / cpu, rss, wall, "", "duckdb read_json(...) GROUP BY fqn, phase")


if __name__ == "__main__":
    main()
