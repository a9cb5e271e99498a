"""The CLI on big traces: CPU time (user + sys), events per CPU second and peak RSS of every verb
of `python -m fqntrace`, on a Chrome trace and a JSON Lines trace of the same events, each verb
against its target (issue 24). (DuckDB beside the verbs, once here:
docs/history/experiments/cli_duckdb.py.)

    python bench/cli_bench.py SOURCE.json --mb 300 [--out DIR] [--pythonpath DIR] [--verbs ...]

SOURCE is a trace the core wrote (scripts/demo.sh's traces/demo.json); the big traces are made
from it by tests/python/bigtrace.py (and deleted at the end unless --keep). --pythonpath runs
another checkout's package (a "before" measurement). Prints a Markdown table and writes it (and
the commands) to OUT/cli_bench.md; a run of this checkout at 300 or 1024 MiB (all verbs) also
replaces the part cli-MB of bench/measured.json and refills docs/benchmarks.md's P9 table and
opening table (`p9-cli` and `costs`, through bench/doc_tables.py).
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
import doc_tables  # noqa: E402  (the table's Markdown and docs/benchmarks.md's section)
import measured  # noqa: E402
from modes import CLI_DOC_SIZES  # noqa: E402
from modes import CLI_RSS_LIMIT_MIB as RSS_LIMIT_MIB  # noqa: E402

# Events per CPU second per verb (the rest: DEFAULT_TARGET), issue 24's bounds and performance
# round 4's for the verbs that read a trace once (issue 45: 3 M); peak RSS: modes.
TARGETS = {"summary": 3_000_000, "validate": 3_000_000, "diff": 3_000_000, "merge": 500_000}
DEFAULT_TARGET = 300_000


# Runs its arguments and prints [exit code, CPU s, sys s, peak RSS MiB, stdout and stderr tails].
RUSAGE_WRAPPER = (
    "import os,resource,subprocess,sys,json;"
    "p=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE,stderr=subprocess.PIPE);"
    "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(json.dumps([p.returncode,u.ru_utime+u.ru_stime,u.ru_stime,u.ru_maxrss/1024,"
    "p.stdout.decode()[-2000:],p.stderr.decode()[-2000:]]))"
)


def measure(cmd, env):
    """Runs cmd as the only child of a fresh `time`-like wrapper so its rusage is its own."""
    wrapper = [sys.executable, "-c", RUSAGE_WRAPPER, *cmd]
    started = time.perf_counter()
    done = subprocess.run(wrapper, stdout=subprocess.PIPE, env=env, check=True)
    wall = time.perf_counter() - started
    rc, cpu, sys_s, rss, out, err = json.loads(done.stdout)
    return rc, cpu, sys_s, rss, wall, out, err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("source")
    add("--mb", type=float, default=300)
    add("--out", default=os.path.join(ROOT, "build", "cli_bench"))
    add("--pythonpath", help="the fqntrace package's parent folder to run")
    add("--verbs", nargs="*", default=None)
    add("--label", default="this checkout")
    add("--keep", action="store_true", help="keep the big traces in OUT (deleted at the end)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mb = int(args.mb) if args.mb == int(args.mb) else args.mb
    chrome, jsonl = (os.path.join(args.out, f"big{mb}.{ext}") for ext in ("json", "jsonl"))
    # merge's and diff's other rank: bigMB.rank1.json, bigMB.rank1.jsonl
    second = {path: "%s.rank1%s" % os.path.splitext(path) for path in (chrome, jsonl)}
    needed = 4 * args.mb * 2.5 * (1 << 20)  # the traces, the cut copies, merge's output
    free = shutil.disk_usage(args.out).free
    if free < needed:
        sys.exit(
            f"cli_bench: {free / (1 << 30):.1f} GiB free in {args.out}, about "
            f"{needed / (1 << 30):.1f} GiB needed for {mb} MiB traces; use --out elsewhere"
        )
    counts, made = {}, []
    for path in (chrome, jsonl):
        for trace, rank in ((path, None), (second[path], 1)):
            if not os.path.exists(trace):
                counts[trace] = bigtrace.make(args.source, trace, args.mb, rank)[0]
                made.append(trace)
    env = dict(os.environ, **({"PYTHONPATH": args.pythonpath} if args.pythonpath else {}))
    py = [sys.executable, "-m", "fqntrace"]

    def events(path):
        """Events in a big trace: its lines but the header and the tail (one event a line)."""
        if path not in counts:
            with open(path, "rb") as f:
                counts[path] = (
                    sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b"")) - 2
                )
        return counts[path]

    cut_at, cuts = 0.72, {}
    for path in (chrome, jsonl):
        cut = path.replace("big", "cut", 1)
        if not os.path.exists(cut):
            with open(path, "rb") as src, open(cut + ".orig", "wb") as dst:
                left = int(os.path.getsize(path) * cut_at)
                while left > 0:
                    data = src.read(min(left, 1 << 24))
                    dst.write(data)
                    left -= len(data)
            made.append(cut + ".orig")
        cuts[path] = cut
    html = os.path.join(args.out, "report.html")
    merged = os.path.join(args.out, "merged.json")
    two_ranks = lambda p: events(p) + events(second[p])  # noqa: E731  (merge, diff: both inputs)
    kept = lambda p: int(events(p) * cut_at)  # noqa: E731  (repair: what it keeps of the cut)
    verbs = [  # (verb, its arguments for trace p, the events it reads of p)
        ("summary", lambda p: ["summary", p], events),
        ("validate", lambda p: ["validate", p], events),
        ("repair", lambda p: ["repair", cuts[p], "-o", cuts[p] + ".fixed"], kept),
        ("report", lambda p: ["report", p, "-o", html], events),
    ]
    merge_diff = [("merge", lambda p: ["merge", p, second[p], "-o", merged], two_ranks)]
    merge_diff += [("diff", lambda p: ["diff", p, second[p]], two_ranks)]
    top = [("top --once", lambda p: ["top", "--once", p], events)]
    # Each verb on both formats in turn; merge and diff, one format at a time.
    plan = [(verb, path, argv, n) for verb, argv, n in verbs for path in (chrome, jsonl)]
    plan += [(verb, path, argv, n) for path in (chrome, jsonl) for verb, argv, n in merge_diff]
    plan += [(verb, path, argv, n) for verb, argv, n in top for path in (chrome, jsonl)]
    rows = []
    try:
        for verb, path, argv, n in plan:
            if args.verbs and verb.split()[0] not in args.verbs:
                continue
            if verb == "repair":
                shutil.copyfile(cuts[path] + ".orig", cuts[path])
            rc, cpu, sys_s, rss, wall, out, err = measure(py + argv(path), env)
            for output in (merged, html, cuts[path], cuts[path] + ".fixed"):
                if os.path.exists(output):
                    os.remove(output)  # the outputs are as big as the inputs: not kept
            n_events = n(path)
            rate = n_events / cpu if cpu > 0 and n_events else 0
            target = TARGETS.get(verb, DEFAULT_TARGET)
            row = {"verb": verb, "format": "JSON Lines" if path.endswith(".jsonl") else "Chrome"}
            row.update(events=n_events, cpu_s=cpu, sys_s=sys_s, events_per_cpu_s=rate)
            row.update(peak_rss_mib=rss, wall_s=wall, target=target)
            row["met"] = rc in (0, 3) and rate >= target and rss <= RSS_LIMIT_MIB
            row["status"] = "" if rc in (0, 3) else f"exit {rc}: {err.strip()[-200:]}"
            shown = (os.path.basename(a) if os.sep in a else a for a in argv(path))
            rows.append({**row, "command": "python -m fqntrace " + " ".join(shown)})
            print(line(rows[-1]), flush=True)
        sizes = {"chrome_mib": os.path.getsize(chrome) / (1 << 20)}
        sizes["jsonl_mib"] = os.path.getsize(jsonl) / (1 << 20)
    finally:
        if not args.keep:
            for path in made:
                if os.path.exists(path):
                    os.remove(path)
    run = {"date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
    run.update(git_commit=measured.git_commit(), loadavg=[None, os.getloadavg()[0]], kind="full")
    run["torch"] = measured.torch_version()
    results = {"run": run, "mb": mb, "label": args.label, "source": os.path.basename(args.source)}
    results.update(**sizes, rows=rows)
    text = doc_tables.cli_table(results)
    with open(os.path.join(args.out, "cli_bench.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    if mb in CLI_DOC_SIZES and not args.pythonpath and not args.verbs:
        write_doc(results)


def line(row):
    """One row for the terminal."""
    return (
        f"{row['verb'][:11]:11} {row['format']:10} {row['events']:>9} ev "
        f"{row['cpu_s']:7.1f} s CPU {row['events_per_cpu_s'] / 1e3:7.0f} k ev/CPU-s "
        f"{row['peak_rss_mib']:7.0f} MiB {row['wall_s']:6.0f} s wall"
        f"{' (' + row['status'] + ')' if row['status'] else ''}"
    )


def write_doc(results):
    """The part cli-MB of bench/measured.json, and docs/benchmarks.md's P9 table and opening
    table, which also shows the other parts' numbers (bench/doc_tables.py)."""
    measured.save({f"cli-{results['mb']}": results})
    doc_tables.update_file(measured.load(), only=["p9-cli", "costs", "costs-stale"])
    print(f"wrote the part cli-{results['mb']} of bench/measured.json and docs/benchmarks.md")


if __name__ == "__main__":
    main()
