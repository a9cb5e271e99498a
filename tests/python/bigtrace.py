"""Large traces for memory and speed measurements, made from a real one: the event lines of a
trace the core wrote, repeated with their times shifted past the previous copy (so every thread
stays in end order, as the core writes).

    python tests/python/bigtrace.py SOURCE.json OUT.json SIZE_MB [--rank R]

OUT ending in .jsonl is written as JSON Lines (the same events), in .gz gzip-compressed.
"""

import argparse
import gzip
import json
import os
import re

_TS = re.compile(r'"ts":(-?\d+)\.(\d{3})')
_DUR = re.compile(r'"dur":(\d+)\.(\d{3})')
_RANK = re.compile(r'"rank": \d+')
_FLOW_ID = re.compile(r'"id":(\d+)')


def _us(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def make(source, output, size_mb, rank=None):
    """Writes output (about size_mb MiB); returns (event lines written, copies of the source)."""
    with open(source) as f:
        lines = f.read().split("\n")
    header = lines[0]
    if rank is not None:
        header = _RANK.sub(f'"rank": {rank}', header, count=1)
        header = re.sub(
            r'"world_size": (\d+)',
            lambda m: f'"world_size": {max(int(m.group(1)), rank + 1)}',
            header,
            count=1,
        )
    events = []
    end = 0
    max_id = 0
    for line in lines[1:]:
        if not line.startswith("{"):
            continue  # the tail
        line = line.rstrip(",")
        ts = _TS.search(line)
        if ts is None:
            events.append((line, None, None, None))  # metadata: written once
            continue
        dur = _DUR.search(line)
        ts_ns = int(ts.group(1)) * 1000 + int(ts.group(2))
        dur_ns = int(dur.group(1)) * 1000 + int(dur.group(2)) if dur else 0
        end = max(end, ts_ns + dur_ns)
        flow = _FLOW_ID.search(line) if line.startswith(('{"ph":"s"', '{"ph":"f"')) else None
        if flow is not None and flow.end() <= ts.start():  # each copy's flows get ids of their
            # own, as in one long run
            max_id = max(max_id, int(flow.group(1)))
            before, after = line[: ts.start()], line[ts.end() :]
            events.append(
                (
                    before[: flow.start()] + '"id":',
                    (int(flow.group(1)), before[flow.end() :] + '"ts":'),
                    ts_ns,
                    after,
                )
            )
            continue
        events.append((line[: ts.start()] + '"ts":', None, ts_ns, line[ts.end() :]))
    period = end + 1_000_000
    target = size_mb * (1 << 20)
    written = 0
    n = 0
    jsonl = output.endswith((".jsonl", ".jsonl.gz"))
    if jsonl:
        fields = json.loads(header + "]}")
        fields.pop("traceEvents", None)
        header = json.dumps({"ph": "header", **fields})
    joiner = "\n" if jsonl else ",\n"
    opener = gzip.open if output.endswith(".gz") else open
    with opener(output, "wt", **({"compresslevel": 1} if output.endswith(".gz") else {})) as out:
        out.write(header + "\n")
        first = True
        copy = 0
        while written < target:
            offset = copy * period
            chunk = []
            for before, flow, ts_ns, after in events:
                if ts_ns is None:
                    if not copy:
                        chunk.append(before)
                    continue
                if flow is not None:
                    before = before + str(flow[0] + copy * max_id) + flow[1]
                chunk.append(before + _us(ts_ns + offset) + after)
            body = joiner.join(chunk)
            out.write(body if first else joiner + body)
            first = False
            written += len(body) + 2
            n += len(chunk)
            copy += 1
        if jsonl:
            out.write(
                '\n{"ph": "footer", "events": %d, "dropped_events": 0, "complete": true}\n' % n
            )
        else:
            out.write(
                '\n], "fqntrace": {"version": "0.1.0", "events": %d, "dropped_events": 0, '
                '"complete": true}}\n' % n
            )
    return n, copy


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("size_mb", type=float)
    parser.add_argument("--rank", type=int)
    a = parser.parse_args()
    n, copies = make(a.source, a.output, a.size_mb, a.rank)
    print(
        f"{a.output}: {n} events ({copies} copies), {os.path.getsize(a.output) / (1 << 20):.0f} MiB"
    )
