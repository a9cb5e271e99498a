"""Whole files, read on top of the stream (tracestream) and its bytes (trace_bytes): ``load``
holds every event of a trace for a verb that needs them at once, ``read_text`` reads any JSON
file whole (a torch.profiler trace to annotate, a summary), ``lines_with`` finds the events on
the lines that hold a mark without decoding the others."""

from fqntrace.analysis.trace_bytes import ByteSource, as_text, check_not_binary
from fqntrace.analysis.tracestream import BATCH_ERRORS, TraceStream, decode_batch, may_miss_events


class LoadedTrace:
    """One trace file in memory (``load``).

    header: the top-level fields (Chrome: everything but traceEvents and the fqntrace tail;
            JSONL: the header line without its "ph").
    events: the event objects, in file order.
    tail:   the ``fqntrace`` tail object (Chrome) or the footer line (JSONL); None if cut off.
    cut:    the file stops before its tail (its complete events are kept).
    dropped_partial: a partial last line was dropped (only when cut).
    event_lines: the 1-based line of each event, when every event has a line of its own.
    """

    def __init__(
        self, path, fmt, header, events, tail, cut=False, dropped_partial=False, event_lines=None
    ):
        self.path = path
        self.format = fmt
        self.header = header
        self.events = events
        self.tail = tail
        self.cut = cut
        self.dropped_partial = dropped_partial
        self.event_lines = event_lines

    @property
    def incomplete(self):
        """True when events may be missing: cut off, repaired, or the writer dropped events."""
        return may_miss_events(self.cut, self.tail)

    def slices(self):
        """The complete ("X") events."""
        return [e for e in self.events if isinstance(e, dict) and e.get("ph") == "X"]


def load(path):
    """The whole trace in memory (a LoadedTrace), read by the stream: for a verb that needs
    every event at once (nesting a file whose threads are not in end order). Raises TraceError
    as the stream does."""
    with TraceStream(path) as stream:
        events = []
        lines = []
        for batch, first_line in stream.batches():
            events += batch
            if first_line is None:
                lines = None
            elif lines is not None:
                lines.extend(range(first_line, first_line + len(batch)))
        header = {**stream.header, **stream.after_events}
        return LoadedTrace(
            path,
            stream.format,
            header,
            events,
            stream.tail,
            cut=stream.cut,
            dropped_partial=stream.dropped_partial,
            event_lines=lines,
        )


def read_text(path):
    """A whole JSON file as text (gzip inflated, invalid UTF-8 kept byte-exact): a file that is
    not read event by event, a torch.profiler trace to annotate or a summary. Raises
    TraceError."""
    source = ByteSource(path)
    try:
        chunks = []
        while True:
            data = source.read()
            if not data:
                break
            chunks.append(data)
    finally:
        source.close()
    data = b"".join(chunks)
    check_not_binary(path, data)
    return as_text(data)


def _finder(mark):
    """find(chunk, start, end): where `mark` first occurs in chunk[start:end], or -1. A mark with
    a "#" (ProfilerStep#) is found by memchr on "#", a byte rare in a trace (step names,
    `Optimizer.step#…`), and its neighbours compared: several times faster than the general
    substring search over a whole file."""
    pivot = mark.find(b"#")
    if pivot < 0:
        return lambda chunk, start, end: chunk.find(mark, start, end)
    tail = len(mark) - pivot

    def find(chunk, start, end):
        at = chunk.find(b"#", start + pivot, end)
        while at >= 0:
            if chunk.startswith(mark, at - pivot) and at + tail <= end:
                return at - pivot
            at = chunk.find(b"#", at + 1, end)
        return -1

    return find


def lines_with(path, mark):
    """The events on the lines of a trace that contain the bytes `mark` (its ProfilerStep
    ranges, say), found by a byte search, not by decoding every event: a list, or None when a
    line holding the mark is not one whole event (not the core's layout: decode it all).
    Each chunk is searched where it was read (no copy of it): only the line that spans two
    chunks is put together."""
    source = ByteSource(path)
    out = []
    rest = b""  # the start of a line the last chunk did not end
    find = _finder(mark)

    def take(line, last):
        """False when the line is not one whole event (a partial last line is skipped)."""
        line = line.strip()
        if line.endswith(b","):
            line = line[:-1]
        try:
            event = decode_batch(line)
        except BATCH_ERRORS:
            return last  # a partial last line (a cut file): not an event yet
        if not isinstance(event, dict) or "traceEvents" in event:
            return False  # not an event: the whole trace on one line, say
        out.append(event)
        return True

    try:
        while True:
            chunk = source.read()
            if not chunk:
                return out if mark not in rest or take(rest, True) else None
            first = chunk.find(b"\n")
            if first < 0:
                rest += chunk
                continue
            head = rest + chunk[:first]
            if mark in head and not take(head, False):
                return None
            last = chunk.rfind(b"\n")
            at = find(chunk, first, last)
            while at >= 0:
                start = chunk.rfind(b"\n", 0, at) + 1
                end = chunk.find(b"\n", at)
                if not take(chunk[start:end], False):
                    return None
                at = find(chunk, end, last)
            rest = chunk[last + 1 :]
    finally:
        source.close()
