"""Writes a big synthetic trace for measuring `python -m fqntrace report` (and the other verbs):
the events of a real trace repeated, each copy shifted past the previous one in time and wrapped
in a `ProfilerStep#N` range, until the file reaches the size asked for.

    python bench/big_trace.py SOURCE.json OUT.json --mb 1000 [--no-steps]

The copies keep the core's layout (one event per line), so the result reads like a long run.
"""
import argparse
import json
import os
import re

TS = re.compile(r'"ts":\s*(-?[0-9.]+)')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--mb", type=float, required=True, help="size of OUT in MB (1e6 bytes)")
    parser.add_argument("--no-steps", action="store_true", help="no ProfilerStep#N ranges")
    args = parser.parse_args()
    with open(args.source) as f:
        text = f.read()
    head, rest = text.split('"traceEvents": [\n', 1)
    body = rest[:rest.rindex("\n]")]
    lines = [line.rstrip(",") for line in body.split("\n") if line.strip()]
    metadata = [line for line in lines if '"ph":"M"' in line.replace(" ", "")]
    events = [line for line in lines if line not in metadata]
    times = [json.loads(line) for line in events]
    start = min(e["ts"] for e in times)
    end = max(e["ts"] + e.get("dur", 0) for e in times)
    span = end - start + 10.0
    pid, tid = times[0]["pid"], times[0]["tid"]
    target = int(args.mb * 1e6)
    written = 0
    copies = 0
    n_events = 0
    with open(args.out, "w") as out:
        out.write(head + '"traceEvents": [\n' + ",\n".join(metadata))
        written += len(head) + len(metadata) * 100
        while written < target:
            shift = copies * span

            def moved(match):
                return f'"ts":{float(match.group(1)) + shift:.3f}'

            chunk = [TS.sub(moved, line, count=1) for line in events]
            if not args.no_steps:
                chunk.insert(0, json.dumps({
                    "ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{copies}",
                    "pid": pid, "tid": tid, "ts": round(start + shift - 1.0, 3),
                    "dur": round(end - start + 2.0, 3),
                    "args": {"fqn": "Global", "phase": "forward", "depth": 0}}))
            piece = ",\n" + ",\n".join(chunk)
            out.write(piece)
            written += len(piece)
            copies += 1
            n_events += len(chunk)
        out.write('\n], "fqntrace": ' + json.dumps({"version": "0.1.0", "events": n_events,
                                                     "dropped_events": 0, "complete": True})
                  + "}\n")
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.0f} MB, {n_events} events, "
          f"{copies} copies of {args.source}")


if __name__ == "__main__":
    main()
