"""`python -m fqntrace merge`: one Chrome trace from several ranks' traces.

Each rank becomes one process row (pid = rank), its timestamps move onto the earliest rank's clock
base (baseTimeNanoseconds), and flow ids are renumbered so two ranks' flows never share one.
Cut-off inputs are repaired in memory; the files are left as they are.

The inputs are read as streams (fqntrace.tracestream), twice: once for what the merged header
needs (rank, clock base, process ids, whether the file is complete), once to write the events
one by one into the output. Memory holds the flows still open (a forward op's "s" whose node's
"f" has not come yet), never the events.
"""
import json
import os
from typing import NamedTuple

from fqntrace.analysis import traceio, tracestream
from fqntrace.analysis.traceio import TraceError

# Replaced by the rank's own rows.
_PROCESS_METADATA = ("process_name", "process_labels", "process_sort_index")


class RankTrace(NamedTuple):
    rank: int
    path: str
    base_ns: int  # baseTimeNanoseconds: the wall clock that ts = 0 stands for
    header: dict
    tail: object  # the tail object, None when cut off
    cut: bool
    incomplete: bool
    pids: list  # the original process ids, as text, sorted


def merge_traces(paths, output, note=lambda message: None):
    """Merges per-rank traces into output; returns (ranks, events written). `note(message)`
    hears about inputs that are merged although cut off."""
    if traceio.plain_path(output).lower().endswith(".jsonl"):
        raise TraceError(f"{output}: merge writes a Chrome trace; name the output .json")
    ranks = [_scan_rank(path, note) for path in paths]
    path_of_rank = {}
    for r in ranks:
        if r.rank in path_of_rank:
            raise TraceError(f"{path_of_rank[r.rank]} and {r.path} are both rank {r.rank} "
                             "(distributedInfo.rank); merge takes one trace per rank")
        path_of_rank[r.rank] = r.path
    ranks.sort(key=lambda r: r.rank)
    base_min = min(r.base_ns for r in ranks)
    header = {
        "schemaVersion": 1,
        "distributedInfo": _distributed_info(ranks),
        "baseTimeNanoseconds": base_min,
        "displayTimeUnit": "ms",
        "traceName": "merged: " + ", ".join(os.path.basename(r.path) for r in ranks),
        "ranks": [{"rank": r.rank, "file": r.path, "baseTimeNanoseconds": r.base_ns,
                   "complete": not r.incomplete} for r in ranks],
    }
    counts = {"events": 0, "slices": 0}
    traceio.write_atomic_chunks(output, _merged_text(header, ranks, base_min, counts))
    return len(ranks), counts["events"]


def _merged_text(header, ranks, base_min, counts):
    """The merged trace in the core's layout (traceio.chrome_text), a line at a time."""
    head = json.dumps(header, ensure_ascii=False)
    yield head[:-1] + ", " + '"traceEvents": [\n'
    separator = ""
    for e in _merged_events(ranks, base_min, counts):
        yield separator + _encode_event(e)
        separator = ",\n"
        counts["events"] += 1
    yield '\n], "fqntrace": ' + json.dumps(_tail(ranks, counts["slices"]),
                                            ensure_ascii=False) + "}\n"


try:  # one call per event, in the core's compact layout; times as the core writes them
    import msgspec

    def _encode_event(event):
        for key in ("ts", "dur"):
            value = event.get(key)
            if isinstance(value, traceio.Micros):
                event[key] = msgspec.Raw(traceio.format_us(int(value)).encode())
        try:
            return msgspec.json.encode(event).decode()
        except (msgspec.EncodeError, UnicodeEncodeError, TypeError):
            for key in ("ts", "dur"):  # text the fast encoder refuses (invalid UTF-8 kept)
                if isinstance(event.get(key), msgspec.Raw):
                    event[key] = traceio.Micros(traceio.to_ns(float(bytes(event[key]))))
            return traceio.dump_event(event)
except ImportError:  # pragma: no cover
    _encode_event = traceio.dump_event


def _merged_events(ranks, base_min, counts):
    flow_ids = {}  # (rank index, cat, id) -> [new id, phases seen]; closed flows are dropped
    next_flow = 0
    for k, r in enumerate(ranks):
        yield from _process_rows(r)
        shift = r.base_ns - base_min
        with tracestream.TraceStream(r.path) as stream:
            for e in stream:
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
                    flow = flow_ids.get(key)
                    if flow is None:
                        next_flow += 1
                        flow = flow_ids[key] = [next_flow, set()]
                    out["id"] = flow[0]
                    flow[1].add(ph)
                    if "s" in flow[1] and "f" in flow[1]:
                        del flow_ids[key]  # both ends written: the id is not needed again
                if ph == "X":
                    counts["slices"] += 1
                yield out


def _scan_rank(path, note):
    """First pass over one input: its header, tail and process ids."""
    pids = set()
    with tracestream.TraceStream(path) as stream:
        for batch, _ in stream.batches():
            pids.update({str(e["pid"]) for e in batch if type(e) is dict and "pid" in e})
    if stream.cut:
        note(f"{path} is cut off; merging its {stream.events_read} complete events "
             "(repaired in memory, the file is left as it is)")
    rank = stream.rank
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise TraceError(f"{path}: no distributedInfo.rank; merge needs each input's rank")
    base = stream.header.get("baseTimeNanoseconds")
    if not isinstance(base, int) or isinstance(base, bool):
        raise TraceError(f"{path}: no baseTimeNanoseconds; merge needs it to align the "
                         "ranks' clocks")
    return RankTrace(rank, path, base, stream.header, stream.tail, stream.cut, stream.incomplete,
                     sorted(pids))


def _process_rows(r):
    """The metadata naming rank r's process row: "rank R", its file and original pids."""
    label = f"rank {r.rank}, {os.path.basename(r.path)}"
    if r.pids:
        label += ", pid " + " ".join(r.pids)
    return [{"ph": "M", "name": "process_name", "pid": r.rank, "tid": 0,
             "args": {"name": f"rank {r.rank}"}},
            {"ph": "M", "name": "process_labels", "pid": r.rank, "tid": 0,
             "args": {"labels": label}},
            {"ph": "M", "name": "process_sort_index", "pid": r.rank, "tid": 0,
             "args": {"sort_index": r.rank}}]


def _distributed_info(ranks):
    """rank 0 of a world as large as the largest rank or world_size seen; the backend when every
    input names the same one."""
    infos = [r.header.get("distributedInfo", {}) for r in ranks]
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
        value = r.tail.get("dropped_events") if isinstance(r.tail, dict) else None
        dropped += value if isinstance(value, int) else 0
    tail = {"events": n_slices, "dropped_events": dropped,
            "complete": all(not r.incomplete for r in ranks), "merged": True}
    if any(r.cut or (isinstance(r.tail, dict) and r.tail.get("repaired")) for r in ranks):
        tail["repaired"] = True
    return tail
