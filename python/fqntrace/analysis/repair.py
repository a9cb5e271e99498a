"""`python -m fqntrace repair`: closes a trace cut off by a crash.

Every complete event is kept byte for byte, a partial last line is dropped, and a tail marked
``complete: false, repaired: true`` closes the file. A complete file is left untouched.

The file is read as a stream (fqntrace.analysis.tracestream: where its last complete event ends, and
whether what follows is a cut or damage, which it names with its line; the core's event lines
are counted by the native engine, analysis/summary_engine.cpp, without being decoded in Python),
then its bytes up to that point are copied into a temporary file that replaces it: memory holds
a read chunk, never the file.
"""

import json

from fqntrace.analysis import summarize, trace_bytes, trace_format, trace_write, tracestream
from fqntrace.analysis.errors import TraceError


def repair_file(path, output=None):
    """Repairs `path` in place, or into `output`; returns the line that says what was done."""
    with tracestream.TraceStream(path) as stream:
        n_events, n_slices = _count(stream)  # damage is reported before "not ours"
        _check_is_ours(path, {**stream.header, **stream.after_events})
        fmt, cut, partial, keep_end = (
            stream.format,
            stream.cut,
            stream.dropped_partial,
            stream.keep_end,
        )
    if not cut:
        extra = f" (nothing written to {output})" if output else ""
        return f"already complete: {n_events} events{extra}"
    target = output or path
    trace_write.write_atomic_chunks(
        target, _repaired_chunks(path, fmt, keep_end, n_slices, partial), like=path
    )
    return _repaired_line(n_events, partial, target, output)


def _count(stream):
    """(events, "X" events) of the whole stream. The core's event lines go to the native engine
    undecoded (count mode: parsed and validated, nothing summed); other layouts, or no native
    module, are decoded here."""
    if summarize._native is None:
        n_events = n_slices = 0
        for batch, _ in stream.batches():
            n_events += len(batch)
            n_slices += sum(1 for e in batch if _is_slice(e))
        return n_events, n_slices
    engine = summarize._native.Engine(stream.format == trace_format.JSONL, count=True)
    counted = [0, 0, 0]  # the engine's events, the general path's events and slices among them

    def block(chunk, start, end):
        n = engine.feed_block(chunk, start, end)
        if n < 0:
            return None  # not whole events in this layout: the general path reads them
        counted[0] += n
        return n

    def event(e):
        counted[1] += 1
        counted[2] += _is_slice(e)

    stream.feed(block, event)
    return counted[0] + counted[1], engine.slices() + counted[2]


def _is_slice(event):
    return isinstance(event, dict) and event.get("ph") == "X"


def _repaired_chunks(path, fmt, keep_end, n_slices, dropped_partial):
    """The first keep_end bytes of the (decompressed) file, then the tail that closes it."""
    source = trace_bytes.ByteSource(path)
    try:
        left = keep_end
        while left > 0:
            data = source.read()
            if not data:
                raise TraceError(
                    f"{path}: the file changed while it was being repaired; run repair again"
                )
            data = data[:left]
            left -= len(data)
            yield data  # bytes: written back exactly, never decoded
    finally:
        source.close()
    yield _closing(fmt, n_slices, dropped_partial)


def _closing(fmt, n_slices, dropped_partial):
    if fmt == trace_format.JSONL:
        footer = {
            "ph": "footer",
            "events": n_slices,
            "complete": False,
            "repaired": True,
            "dropped_lines": 1 if dropped_partial else 0,
        }
        return "\n" + json.dumps(footer) + "\n"
    tail = {
        "events": n_slices,
        "complete": False,
        "repaired": True,
        "dropped_lines": 1 if dropped_partial else 0,
    }
    return "\n], \"fqntrace\": " + json.dumps(tail) + "}\n"


def _repaired_line(n_events, dropped_partial, target, output):
    dropped = "dropped 1 partial line" if dropped_partial else "no partial line"
    wrote = f"; wrote {target}" if output else ""
    return f"repaired: kept {n_events} events ({dropped}){wrote}"


def _check_is_ours(path, header):
    """Only a file the core began (its header is there) is closed: completing anything else
    would write a file that is still not a trace."""
    info = header.get("distributedInfo") if isinstance(header, dict) else None
    if (
        not isinstance(header, dict)
        or header.get("schemaVersion") != 1
        or not isinstance(info, dict)
        or not isinstance(info.get("rank"), int)
        or not isinstance(info.get("world_size"), int)
        or not isinstance(header.get("baseTimeNanoseconds"), int)
    ):
        raise TraceError(
            f"{path}: not an fqntrace trace (its header lacks schemaVersion 1, "
            "distributedInfo or baseTimeNanoseconds); nothing repaired"
        )
