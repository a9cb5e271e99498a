"""Drops under load at a given drain-thread nice value: every core busy with a nice-0 busy loop
(a hog process per core, as DDP ranks filling a node), while a traced loop of tiny ops
(`torch.add` on 4-element tensors, the fastest event source there is) runs; the child sets its
drain thread's nice value itself (os.setpriority on the thread id), so each value is tried with
the same build. Prints, per nice value, dropped events (the trace's tail) and the loop's ops/s.

    .venv/bin/python docs/history/experiments/drain_nice.py [--ops 3000000] [--nice 0 5 10 19]

Once part of P7 (bench/p7_drain.py); it chose the drain thread's nice value (5 above the
program's, tests/python/test_tracing.py holds it), and its last table is in docs/benchmarks.md,
by hand.
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import os, sys, time, torch
import fqntrace
n, nice = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
def drain_threads():
    return [int(t) for t in os.listdir("/proc/self/task")
            if open(f"/proc/self/task/{t}/comm").read().strip() == "fqntrace-drain"]
deadline = time.monotonic() + 10  # the thread names itself once it runs: under load, a while
while not (drain := drain_threads()) and time.monotonic() < deadline:
    time.sleep(0.01)
assert len(drain) == 1, drain
os.setpriority(os.PRIO_PROCESS, drain[0], nice)
a, b = torch.ones(4), torch.ones(4)
t0 = time.perf_counter()
for _ in range(n):
    torch.add(a, b)
print(n / (time.perf_counter() - t0))
"""


def hog():
    while True:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=3_000_000)
    parser.add_argument("--nice", type=int, nargs="+", default=[0, 5, 10, 19])
    parser.add_argument("--hogs", type=int, default=os.cpu_count())
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="fqntrace-nice-") as d:
            for nice in args.nice:
                path = os.path.join(d, f"nice{nice}.json")
                env = {k: v for k, v in os.environ.items() if not k.startswith("FQNTRACE")}
                env.update(FQNTRACE=path, OMP_NUM_THREADS="1")
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(args.ops), str(nice)],
                    env=env,
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                ).stdout
                tail = json.load(open(path))["fqntrace"]
                rows.append(
                    {
                        "nice": nice,
                        "ops": args.ops,
                        "ops_per_s": float(out.split()[-1]),
                        "events": tail["events"],
                        "dropped": tail["dropped_events"],
                    }
                )
                print(
                    f"drain nice {nice:>2}: dropped {tail['dropped_events']:,} of "
                    f"{tail['events'] + tail['dropped_events']:,} events; loop "
                    f"{rows[-1]['ops_per_s']:,.0f} ops/s ({args.hogs} busy hogs)",
                    flush=True,
                )
                time.sleep(1)
    finally:
        for h in hogs:
            h.terminate()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
