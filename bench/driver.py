"""Runs the fqntrace benchmarks (P1 … P8): every mode in its own process (bench/run_mode.py),
modes interleaved in rounds (the order rotates each round), medians. Writes each part's summary
and its run's facts (date, commit, torch, load) to bench/measured.json, the raw samples to
build/bench/raw/, and fills the generated sections of docs/benchmarks.md (bench/doc_tables.py).

    .venv/bin/python bench/driver.py [--quick]      # scripts/bench.sh runs this after set-up

On a noisy 2-core machine single numbers mean little: each process reports the median of its
samples, the tables show the median over rounds, and derived numbers (added ns/op, slowdowns) are
computed per round against that round's baseline process before taking the median.
"""

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
import time

import doc_tables
import measured
import p1_per_op
import p2_transformer
import p3_trackers
import p4_exporters
import p5_rss
import p7_drain
import p8_ddp
from runner import HERE, PY, ROOT, Runner, log, run_json

CALLGRIND_SETTINGS = {"ops": 5000, "mlp_steps": 50, "ddp_steps": 20}


def machine():
    info = {"hostname": platform.node(), "kernel": platform.release()}
    info.update(python=platform.python_version(), cores=os.cpu_count())
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    info["loadavg_start"] = os.getloadavg()
    return info


def run_callgrind(runner, quick):
    """Instructions per op and step by mode, P8c (bench/callgrind_ops.py)."""
    s = CALLGRIND_SETTINGS
    log(f"callgrind: instructions per op, {s['ops']:,} ops per mode")
    args = f"--ops {s['ops']} --mlp-steps {s['mlp_steps']} --jobs 2 --whole --ddp-steps {s['ddp_steps']}"
    return run_json([PY, os.path.join(HERE, "callgrind_ops.py"), *args.split()], timeout=2400)


# Each part: its name in bench/measured.json and `--only`, and what measures it.
PARTS = {
    "p1": p1_per_op.run,
    "p2": p2_transformer.run,
    "p3": p3_trackers.run,
    "p4": p4_exporters.run,
    "p5": p5_rss.run,
    "drain": p7_drain.run,
    "ddp": p8_ddp.run,
    "callgrind": run_callgrind,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and ops (a smoke run)")
    parser.add_argument(
        "--only",
        default=None,
        help=f"comma-separated subset of {','.join(PARTS)} (default: all; "
        "--quick skips callgrind). The other parts keep their numbers in "
        "bench/measured.json",
    )
    parser.add_argument("--results", default=measured.PATH)
    parser.add_argument("--doc", default=doc_tables.DOC)
    args = parser.parse_args()
    kind = "quick" if args.quick else "full"
    only = [p for p in PARTS if not (args.quick and p == "callgrind")]
    only = args.only.split(",") if args.only else only
    if unknown := [p for p in only if p not in PARTS]:
        sys.exit(f"bench: unknown part {', '.join(unknown)} (parts: {', '.join(PARTS)})")
    started = time.time()
    common = {"git_commit": measured.git_commit(), "kind": kind, "torch": measured.torch_version()}
    parts = {}
    tmpdir = tempfile.mkdtemp(prefix="fqntrace-bench-")
    runner = Runner(tmpdir)
    try:
        for part in only:
            date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            load_start = os.getloadavg()[0]
            numbers = PARTS[part](runner, args.quick)
            if numbers is not None:
                loadavg = [load_start, os.getloadavg()[0]]
                parts[part] = {**numbers, "run": {"date": date, **common, "loadavg": loadavg}}
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if not parts:
        sys.exit("bench: no part measured anything")
    raw = measured.save(parts, machine(), args.results)
    log(
        f"wrote {os.path.relpath(args.results, ROOT)} ({', '.join(parts)}; "
        f"{time.time() - started:.0f} s, {runner.count} processes), raw samples in "
        f"{os.path.relpath(raw, ROOT)}"
    )
    results = measured.load(args.results)
    # Only the generated sections change; the hand-written analysis around them stays.
    doc_tables.update_file(results, args.doc)
    log(f"updated the generated sections of {os.path.relpath(args.doc, ROOT)}")
    print(doc_tables.terminal_summary(results))


if __name__ == "__main__":
    main()
