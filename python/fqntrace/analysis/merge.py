"""`python -m fqntrace merge`: one Chrome trace from several ranks' traces.

Each rank becomes one process row (pid = rank), its timestamps move onto the earliest rank's clock
base (baseTimeNanoseconds), and flow ids are renumbered so two ranks' flows never share one.
Cut-off inputs are repaired in memory; the files are left as they are.

The inputs are read as streams (tracestream.py), twice: once for what the merged header
needs (rank, clock base, process ids, whether the file is complete), once to write the events
into the output. Memory holds the flows still open (a forward op's "s" whose node's "f" has not
come yet), never the events.

Both passes run in native code when it is built (fqntrace.analysis._native_merge,
analysis/merge_engine.cpp): the core writes one event per line, so the reader's blocks of whole
lines go to it as bytes; it rewrites the few fields a line changes (pid, ts, dur, a flow's id) and
copies the rest, after checking those bytes are exactly what this module's Python loop would
write. A block it cannot rewrite exactly (another layout, an unusual number or escape) goes to
the Python loop below, from there to the end of that input; the output is the same either way.
"""

import json
import os
from typing import NamedTuple

from fqntrace.analysis import trace_events, trace_format, trace_write, tracestream
from fqntrace.analysis.errors import TraceError

try:
    from fqntrace.analysis import _native_merge as _native
except ImportError:  # not built, or a CPU without AVX2: the Python loop does the work
    _native = None

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
    if trace_format.base_name(output).lower().endswith(".jsonl"):
        raise TraceError(f"{output}: merge writes a Chrome trace; name the output .json")
    merger = _native.Merger() if _native is not None else None
    ranks = [_scan_rank(path, note, merger) for path in paths]
    path_of_rank = {}
    for r in ranks:
        if r.rank in path_of_rank:
            raise TraceError(
                f"{path_of_rank[r.rank]} and {r.path} are both rank {r.rank} "
                "(distributedInfo.rank); merge takes one trace per rank"
            )
        path_of_rank[r.rank] = r.path
    ranks.sort(key=lambda r: r.rank)
    base_min = min(r.base_ns for r in ranks)
    header = {
        "schemaVersion": 1,
        "distributedInfo": _distributed_info(ranks),
        "baseTimeNanoseconds": base_min,
        "displayTimeUnit": "ms",
        "traceName": "merged: " + ", ".join(os.path.basename(r.path) for r in ranks),
        "ranks": [
            {
                "rank": r.rank,
                "file": r.path,
                "baseTimeNanoseconds": r.base_ns,
                "complete": not r.incomplete,
            }
            for r in ranks
        ],
    }
    counts = {"events": 0, "slices": 0}
    if any(not (0 <= r.rank < 1 << 62 and abs(r.base_ns - base_min) < 1 << 62) for r in ranks):
        merger = None  # numbers beyond the native rewrite's 64 bits: the Python loop
    trace_write.write_atomic_chunks(output, _merged_text(header, ranks, base_min, counts, merger))
    return len(ranks), counts["events"]


def _merged_text(header, ranks, base_min, counts, merger):
    """The merged trace in the core's layout (a header line, one event per line, the tail
    line), a line (or, from the native rewrite, a block of lines as bytes) at a time."""
    head = json.dumps(header, ensure_ascii=False)
    yield head[:-1] + ", " + '"traceEvents": [\n'
    separator = ""
    for e in _merged_events(ranks, base_min, counts, merger):
        if type(e) is bytes:  # lines each after ",\n": a rank's process rows came first
            yield e
            continue
        yield separator + _encode_event(e)
        separator = ",\n"
        counts["events"] += 1
    yield (
        '\n], "fqntrace": ' + json.dumps(_tail(ranks, counts["slices"]), ensure_ascii=False) + "}\n"
    )


try:  # one call per event, in the core's compact layout; times as the core writes them
    import msgspec

    def _encode_event(event):
        for key in ("ts", "dur"):
            value = event.get(key)
            if isinstance(value, trace_write.Micros):
                event[key] = msgspec.Raw(trace_events.format_us(int(value)).encode())
        try:
            return msgspec.json.encode(event).decode()
        except (msgspec.EncodeError, UnicodeEncodeError, TypeError):
            for key in ("ts", "dur"):  # text the fast encoder refuses (invalid UTF-8 kept)
                if isinstance(event.get(key), msgspec.Raw):
                    event[key] = trace_write.Micros(trace_events.to_ns(float(bytes(event[key]))))
            return trace_write.dump_event(event)
except ImportError:  # pragma: no cover
    _encode_event = trace_write.dump_event
    _native = None  # it writes msgspec's spelling: without msgspec the Python loop does it all


def _merged_events(ranks, base_min, counts, merger):
    """The merged events in order: dicts (the Python loop) or bytes (blocks the native rewrite
    wrote)."""
    flow_id = _NativeFlows(merger) if merger is not None else _Flows()
    for r in ranks:
        yield from _process_rows(r)
        shift = r.base_ns - base_min
        flow_id.start_rank()
        with tracestream.TraceStream(r.path) as stream:
            if merger is None:
                batches = stream.batches()
            else:
                merger.start_rank(r.rank, shift, stream.format == trace_format.JSONL)
                written = []

                def block(chunk, start, end):
                    done = merger.rewrite_block(chunk, start, end)
                    if done is None:
                        return None  # not lines it rewrites exactly: the Python loop reads on
                    text, n_read, n_written, n_slices = done
                    written.append(text)
                    counts["events"] += n_written
                    counts["slices"] += n_slices
                    return n_read

                batches = stream.sink_batches(block)
            for batch, _ in batches:
                if merger is not None and written:
                    yield written.pop()
                for e in batch:
                    out = _rewrite(e, r.rank, shift, flow_id, counts)
                    if out is not None:
                        yield out
            if merger is not None and written:  # the block before the tail
                yield written.pop()


def _rewrite(e, rank, shift, flow_id, counts):
    """One input event as the merged trace has it (a new dict), None when it is left out."""
    if not isinstance(e, dict):
        return None
    ph = e.get("ph")
    if ph == "M" and e.get("name") in _PROCESS_METADATA:
        return None
    out = dict(e)
    if "pid" in out or ph != "M":
        out["pid"] = rank
    if trace_events.is_number(out.get("ts")):
        out["ts"] = trace_write.Micros(trace_events.to_ns(out["ts"]) + shift)
    if trace_events.is_number(out.get("dur")):
        out["dur"] = trace_write.Micros(trace_events.to_ns(out["dur"]))
    if ph in ("s", "t", "f") and "id" in out:
        out["id"] = flow_id(out.get("cat"), out["id"], ph)
    if ph == "X":
        counts["slices"] += 1
    return out


class _Flows:
    """New flow ids: one per (cat, id) of a rank, in order of appearance across the ranks. A
    flow whose both ends were written is forgotten (its id is not looked up again)."""

    def __init__(self):
        self.open = {}  # (cat, id) as JSON -> [new id, phases seen]
        self.last = 0

    def start_rank(self):
        self.open = {}  # another rank's flows never match this one's

    def __call__(self, cat, flow, ph):
        key = (json.dumps(cat), json.dumps(flow))
        entry = self.open.get(key)
        if entry is None:
            self.last += 1
            entry = self.open[key] = [self.last, set()]
        entry[1].add(ph)
        if "s" in entry[1] and "f" in entry[1]:
            del self.open[key]
        return entry[0]


class _NativeFlows:
    """The same numbering kept by the native merger, for the events the Python loop reads: the
    key is the JSON text of cat and id as msgspec writes them, which is the text the native
    rewrite finds on the line (it takes only lines written that way)."""

    def __init__(self, merger):
        self.merger = merger

    def start_rank(self):
        pass  # merger.start_rank() does it

    def __call__(self, cat, flow, ph):
        return self.merger.flow(_json_bytes(cat) + b"\0" + _json_bytes(flow), ph)


def _json_bytes(value):
    """value as JSON text the way msgspec writes it (b"\\1" and Python's spelling when msgspec
    cannot: never the text of a line the engine read)."""
    try:
        return msgspec.json.encode(value)
    except (msgspec.EncodeError, UnicodeEncodeError, TypeError):
        return b"\1" + json.dumps(value).encode()


def _scan_rank(path, note, merger):
    """First pass over one input: its header, tail and process ids."""
    pids = set()
    with tracestream.TraceStream(path) as stream:
        if merger is None:
            for batch, _ in stream.batches():
                pids.update({str(e["pid"]) for e in batch if type(e) is dict and "pid" in e})
        else:
            jsonl = stream.format == trace_format.JSONL

            def block(chunk, start, end):
                n = merger.scan_block(chunk, start, end, jsonl)
                return None if n < 0 else n

            def event(e):
                if type(e) is dict and "pid" in e:
                    pids.add(str(e["pid"]))

            stream.feed(block, event)
            pids.update(merger.take_pids())
    if stream.cut:
        note(
            f"{path} is cut off; merging its {stream.events_read} complete events "
            "(repaired in memory, the file is left as it is)"
        )
    rank = stream.rank
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise TraceError(f"{path}: no distributedInfo.rank; merge needs each input's rank")
    base = stream.header.get("baseTimeNanoseconds")
    if not isinstance(base, int) or isinstance(base, bool):
        raise TraceError(
            f"{path}: no baseTimeNanoseconds; merge needs it to align the ranks' clocks"
        )
    return RankTrace(
        rank, path, base, stream.header, stream.tail, stream.cut, stream.incomplete, sorted(pids)
    )


def _process_rows(r):
    """The metadata naming rank r's process row: "rank R", its file and original pids."""
    label = f"rank {r.rank}, {os.path.basename(r.path)}"
    if r.pids:
        label += ", pid " + " ".join(r.pids)
    return [
        {
            "ph": "M",
            "name": "process_name",
            "pid": r.rank,
            "tid": 0,
            "args": {"name": f"rank {r.rank}"},
        },
        {"ph": "M", "name": "process_labels", "pid": r.rank, "tid": 0, "args": {"labels": label}},
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": r.rank,
            "tid": 0,
            "args": {"sort_index": r.rank},
        },
    ]


def _distributed_info(ranks):
    """rank 0 of a world as large as the largest rank or world_size seen; the backend when every
    input names the same one."""
    infos = [r.header.get("distributedInfo", {}) for r in ranks]
    world = max(
        [r.rank + 1 for r in ranks]
        + [info.get("world_size", 0) for info in infos if isinstance(info.get("world_size"), int)]
    )
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
    tail = {
        "events": n_slices,
        "dropped_events": dropped,
        "complete": all(not r.incomplete for r in ranks),
        "merged": True,
    }
    if any(r.cut or (isinstance(r.tail, dict) and r.tail.get("repaired")) for r in ranks):
        tail["repaired"] = True
    # A GPU any rank used (said only when every rank's trace says what it used).
    devices = [trace_events.device_use(r.tail) for r in ranks]
    if devices and None not in devices:
        used = [d for d in devices if d["used"]]
        tail["device"] = dict(used[0] if used else {"used": False})
        tail["device"].pop("collected", None)
        collected = [d["collected"] for d in devices if "collected" in d]
        if collected:  # FQNTRACE_DEVICE's counts, over the ranks
            keys = {k for c in collected for k in c if k != "off"}
            tail["device"]["collected"] = {k: sum(c.get(k, 0) for c in collected) for k in keys}
            offs = [c["off"] for c in collected if "off" in c]
            if offs:
                tail["device"]["collected"]["off"] = offs[0]
    return tail
