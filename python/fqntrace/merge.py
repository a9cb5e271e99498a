"""`python -m fqntrace merge`: one Chrome trace from several ranks' traces.

Each rank becomes one process row (pid = rank), its timestamps move onto the earliest rank's clock
base (baseTimeNanoseconds), and flow ids are renumbered so two ranks' flows never share one.
Cut-off inputs are repaired in memory; the files are left as they are.
"""
import json
import os
from typing import NamedTuple

from fqntrace import traceio
from fqntrace.traceio import TraceError

# Replaced by the rank's own rows.
_PROCESS_METADATA = ("process_name", "process_labels", "process_sort_index")


class RankTrace(NamedTuple):
    rank: int
    path: str
    base_ns: int  # baseTimeNanoseconds: the wall clock that ts = 0 stands for
    trace: traceio.Trace


def merge_traces(paths, output, note=lambda message: None):
    """Merges per-rank traces into output; returns (ranks, events written). `note(message)`
    hears about inputs that are merged although cut off."""
    if traceio.plain_path(output).lower().endswith(".jsonl"):
        raise TraceError(f"{output}: merge writes a Chrome trace; name the output .json")
    ranks = [_load_rank(path, note) for path in paths]
    path_of_rank = {}
    for r in ranks:
        if r.rank in path_of_rank:
            raise TraceError(f"{path_of_rank[r.rank]} and {r.path} are both rank {r.rank} "
                             "(distributedInfo.rank); merge takes one trace per rank")
        path_of_rank[r.rank] = r.path
    ranks.sort(key=lambda r: r.rank)
    base_min = min(r.base_ns for r in ranks)

    events = []
    flow_ids = {}
    n_slices = 0
    for k, r in enumerate(ranks):
        events += _process_rows(r)
        shift = r.base_ns - base_min
        for e in r.trace.events:
            if not isinstance(e, dict):
                continue
            ph = e.get("ph")
            if ph == "M" and e.get("name") in _PROCESS_METADATA:
                continue
            out = dict(e)
            if "pid" in out or ph != "M":
                out["pid"] = r.rank
            if traceio.is_number(out.get("ts")):
                out["ts"] = traceio.Micros(traceio.to_ns(out["ts"]) + shift)
            if traceio.is_number(out.get("dur")):
                out["dur"] = traceio.Micros(traceio.to_ns(out["dur"]))
            if ph in ("s", "t", "f") and "id" in out:
                key = (k, json.dumps(out.get("cat")), json.dumps(out["id"]))
                out["id"] = flow_ids.setdefault(key, len(flow_ids) + 1)
            if ph == "X":
                n_slices += 1
            events.append(out)

    header = {
        "schemaVersion": 1,
        "distributedInfo": _distributed_info(ranks),
        "baseTimeNanoseconds": base_min,
        "displayTimeUnit": "ms",
        "traceName": "merged: " + ", ".join(os.path.basename(r.path) for r in ranks),
        "ranks": [{"rank": r.rank, "file": r.path, "baseTimeNanoseconds": r.base_ns,
                   "complete": not r.trace.incomplete} for r in ranks],
    }
    traceio.write_atomic(output, traceio.chrome_text(header, events, _tail(ranks, n_slices)))
    return len(ranks), len(events)


def _load_rank(path, note):
    trace = traceio.load(path)
    if trace.cut:
        note(f"{path} is cut off; merging its {len(trace.events)} complete events "
             "(repaired in memory, the file is left as it is)")
    rank = trace.rank
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise TraceError(f"{path}: no distributedInfo.rank; merge needs each input's rank")
    base = trace.header.get("baseTimeNanoseconds")
    if not isinstance(base, int) or isinstance(base, bool):
        raise TraceError(f"{path}: no baseTimeNanoseconds; merge needs it to align the "
                         "ranks' clocks")
    return RankTrace(rank, path, base, trace)


def _process_rows(r):
    """The metadata naming rank r's process row: "rank R", its file and original pids."""
    pids = sorted({str(e["pid"]) for e in r.trace.events if isinstance(e, dict) and "pid" in e})
    label = f"rank {r.rank}, {os.path.basename(r.path)}"
    if pids:
        label += ", pid " + " ".join(pids)
    return [{"ph": "M", "name": "process_name", "pid": r.rank, "tid": 0,
             "args": {"name": f"rank {r.rank}"}},
            {"ph": "M", "name": "process_labels", "pid": r.rank, "tid": 0,
             "args": {"labels": label}},
            {"ph": "M", "name": "process_sort_index", "pid": r.rank, "tid": 0,
             "args": {"sort_index": r.rank}}]


def _distributed_info(ranks):
    """rank 0 of a world as large as the largest rank or world_size seen; the backend when every
    input names the same one."""
    infos = [r.trace.header.get("distributedInfo", {}) for r in ranks]
    world = max([r.rank + 1 for r in ranks] +
                [info.get("world_size", 0) for info in infos
                 if isinstance(info.get("world_size"), int)])
    info = {}
    backends = {i.get("backend") for i in infos}
    if len(backends) == 1 and isinstance(next(iter(backends)), str):
        info["backend"] = next(iter(backends))
    info.update({"rank": 0, "world_size": world})
    return info


def _tail(ranks, n_slices):
    dropped = 0
    for r in ranks:
        value = r.trace.tail.get("dropped_events") if isinstance(r.trace.tail, dict) else None
        dropped += value if isinstance(value, int) else 0
    tail = {"events": n_slices, "dropped_events": dropped,
            "complete": all(not r.trace.incomplete for r in ranks), "merged": True}
    if any(r.trace.cut or (isinstance(r.trace.tail, dict) and r.trace.tail.get("repaired"))
           for r in ranks):
        tail["repaired"] = True
    return tail
