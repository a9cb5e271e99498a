"""The one reader of trace files: every verb reads a trace through it, one batch of events at a
time, in memory bounded by a read chunk (4 MiB) and one event, never by the file. Its bytes come
from ``trace_bytes``, the format's rules from ``trace_format``; ``whole_file`` and ``follower``
(`top`) build on it.

* Chrome trace (``.json``): the header up to ``"traceEvents": [``, then the events (the core
  writes one per line, joined by ``,\\n``), then the tail ``], "fqntrace": {...}}``, written only
  at normal exit. After a crash the file stops anywhere, possibly inside a line.
* JSON Lines (``.jsonl``): a ``{"ph": "header", ...}`` line, event lines, a ``{"ph": "footer",
  ...}`` line at normal exit.

**Cut and damage.** A cut-off file is read up to its last complete event: a partial last line is
dropped (``cut``, ``dropped_partial``). Damage anywhere but at the end (a bad line followed by
more lines) is not a cut and is reported (``DamagedTrace``, with the line, and where the JSON
breaks) instead of guessed around; so is a file with no header (``NotATrace`` when it is valid
JSON of another kind).

**Fast path.** The core writes one event per line, so a chunk cut at its last newline holds only
whole events: the chunk's lines are decoded in one call of a JSON decoder made for this (msgspec,
else the standard library's; the whole chunk as one JSON array: Chrome's lines already end with
commas, JSON Lines' newlines become commas). A decode that fails means the chunk is not whole
events in that layout (pretty-printed, one long line, damage, a cut): from there on the file is
read by the **general path**, ``json.JSONDecoder.raw_decode`` event by event over text chunks,
which accepts any layout and tells a cut (a partial last line: every complete event is kept) from
damage (a bad event followed by more lines: a DamagedTrace). Both paths give the same events.

A stream also knows, for messages and for `repair`, the line of each event (fast path, and JSON
Lines' general path) and the byte offset just past the last complete event (``keep_end``, in the
decompressed text). The line and column of damage are counted only when it is reported
(``trace_damage``).
"""

import codecs
import functools
import json
import re

from fqntrace.analysis import trace_damage, trace_events
from fqntrace.analysis.errors import DamagedTrace, TraceError
from fqntrace.analysis.trace_bytes import ByteSource, as_text, check_not_binary
from fqntrace.analysis.trace_format import (
    _EMPTY_TAIL,
    _TAIL_PREFIX,
    CHROME,
    FOOTER_MARK,
    JSONL,
    format_by_name,
    header_fields,
    parse_chrome_header,
    parse_chrome_tail,
)

try:  # a decoder made for bulk JSON: ~2x the standard library's speed on the core's lines
    from msgspec.json import decode as decode_batch

    BATCH_ERRORS = (ValueError, __import__("msgspec").DecodeError)
except ImportError:  # pragma: no cover - the standard library's C decoder, same results
    decode_batch = json.loads
    BATCH_ERRORS = (ValueError,)

MAX_EVENT_CHARS = 1 << 24  # far more than any event (shapes included) takes
DECODER = json.JSONDecoder()
_SEPARATORS = re.compile(r"[\s,]*")
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_END_MARK_WINDOW = 1 << 16


def find_end_mark(buf, mark, start, end):
    """Where mark (the Chrome tail's b"\\n]", the JSON Lines footer's) first occurs in
    buf[start:end], looked for in its last _END_MARK_WINDOW bytes only (the search over a whole
    chunk was a fifth of `top`'s time): the tail or footer ends the file, so one that starts
    further back has lines after it in the chunk, which the engine does not take as events and
    the general path reads. -1: not there."""
    return buf.find(mark, max(start, end - _END_MARK_WINDOW), end)


_LEADING_BRACKET = re.compile(rb"\s*\]")


class TraceStream:
    """One trace file read as a stream of events. Iterate it once for the events (or
    ``batches()`` for lists of them); afterwards ``tail`` (None if cut off), ``cut``,
    ``dropped_partial``, ``keep_end`` and ``after_events`` (a Chrome trace's top-level fields
    after traceEvents other than the tail: a torch.profiler trace's traceName, say) are known.
    ``header`` is read when the stream is opened. Use as a context manager (or call close())."""

    def __init__(self, path):
        self.path = path
        self.tail = None
        self.cut = False
        self.dropped_partial = False
        self.events_read = 0
        self.keep_end = 0  # byte offset just past the last complete event (or the header)
        self.after_events = {}
        self._source = ByteSource(path)
        self._bbuf = b""  # fast path: bytes not consumed yet start at _bpos
        self._bpos = 0
        self._offset = 0  # bytes of the text before _bbuf[0]
        self._line = 1  # the line _bbuf[_bpos] is on
        self._beof = False
        self._text_mode = False  # the general path: text in _buf from _pos
        self._block_sink = None  # feed(): fast-path blocks go there undecoded
        self._buf = ""
        self._pos = 0
        try:
            self._fill_bytes()
            check_not_binary(path, self._bbuf)
            self.format = self._detect()
            self.header = (
                self._read_chrome_header() if self.format == CHROME else self._read_jsonl_header()
            )
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------
    def close(self):
        self._source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def rank(self):
        return trace_events.rank_of(self.header)

    @property
    def incomplete(self):
        return may_miss_events(self.cut, self.tail)

    def _line_at(self, pos):
        """General path: the line of _buf[pos], for a message."""
        return trace_damage.positions(self.path, self._byte_offset_at(pos))[0][0]

    def _json_error(self, pos, reason):
        """Where the JSON first breaks, found when asked (validate says it)."""
        return functools.partial(
            trace_damage.json_error_at, self.path, self._byte_offset_at(pos), reason
        )

    def _fill_bytes(self):
        """Appends the next chunk to the byte buffer (dropping what was consumed)."""
        if self._beof:
            return False
        rest = len(self._bbuf) - self._bpos
        again = self._source.read_again(rest) if rest else None
        if again is not None:  # the unconsumed bytes and the next chunk, read as one
            self._offset += self._bpos
            self._bbuf, self._bpos = again, 0
            self._beof = len(again) <= rest
            return not self._beof
        chunk = self._source.read()
        if not chunk:
            self._beof = True
            return False
        self._offset += self._bpos
        self._bbuf = self._bbuf[self._bpos :] + chunk
        self._bpos = 0
        return True

    def _to_text(self):
        """From here on the general path: the unread bytes become text."""
        self._text_mode = True
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._text_base = self._offset + self._bpos  # byte offset of _buf[0]
        self._buf = self._decoder.decode(self._bbuf[self._bpos :], final=self._beof)
        self._pos = 0
        self._counted = 0  # _buf[:_counted] is _text_bytes - _text_base bytes
        self._text_bytes = self._text_base
        self._bbuf = b""
        self._bpos = 0

    def _fill(self):
        """General path: appends the next chunk of text (dropping what was consumed)."""
        if self._beof:
            return False
        chunk = self._source.read()
        if not chunk:
            self._beof = True
            rest = self._decoder.decode(b"", final=True)
            if rest:
                self._buf += rest
                return True
            return False
        self._byte_offset_at(self._pos)
        self._buf = self._buf[self._pos :] + self._decoder.decode(chunk)
        self._counted -= self._pos
        self._pos = 0
        return True

    def _byte_offset_at(self, pos):
        """General path: the byte offset of _buf[pos] (pos never goes back)."""
        if pos > self._counted:
            self._text_bytes += len(
                self._buf[self._counted : pos].encode("utf-8", "surrogateescape")
            )
            self._counted = pos
        return self._text_bytes

    def _detect(self):
        named = format_by_name(self.path)
        if named is not None:
            return named
        while b"\n" not in self._bbuf and self._fill_bytes():
            pass
        first = self._bbuf.lstrip().split(b"\n", 1)[0]
        try:
            obj = json.loads(as_text(first))
        except ValueError:
            return CHROME
        return JSONL if isinstance(obj, dict) and obj.get("ph") == "header" else CHROME

    def _empty(self):
        return TraceError(
            f"{self.path}: empty file (the traced program wrote nothing; was it killed at start?)"
        )

    def batches(self):
        """Lists of events in file order, with the line of the first one when every event of
        the list is on a line of its own (else None)."""
        if self.format == JSONL:
            return self._jsonl_batches()
        return self._chrome_batches()

    def __iter__(self):
        for batch, _ in self.batches():
            yield from batch

    def _consume(self, end):
        """Fast path: _bbuf[_bpos:end] has been read."""
        if self._block_sink is None:  # a sink has no use for line numbers: no count
            self._line += self._bbuf.count(b"\n", self._bpos, end)
        self._bpos = end

    def _block(self, lines, body):
        """(events, count) of a fast-path block of whole event lines, (None, None) when it is
        not whole events in this layout."""
        events = self._decoded(lines.replace(b"\n", b",") if body is None else body)
        return events, None if events is None else len(events)

    def _sink_block(self, buf, end, consume_to):
        """feed(): buf[_bpos:end] (whole lines) to the block sink, in place (no copy of the
        chunk); False when the sink does not take them as whole events (nothing consumed)."""
        n = self._block_sink(buf, self._bpos, end)
        if n is None:
            return False
        if n:
            self.keep_end = self._offset + buf.rfind(b"}", self._bpos, end) + 1
            self.events_read += n
        self._consume(consume_to)
        return True

    def _sink_chrome_block(self, buf, newline):
        """The Chrome fast path with a sink: where the tail starts (-1: not in this chunk), or
        None when the lines are not whole events."""
        tail = find_end_mark(buf, b"\n]", self._bpos, newline)
        if tail < 0 and _LEADING_BRACKET.match(buf, self._bpos):
            tail = self._bpos
        end = newline if tail < 0 else tail
        if not self._sink_block(buf, end, newline + 1 if tail < 0 else end):
            return None
        return tail

    def _sink_jsonl_block(self, buf, newline):
        """The JSON Lines fast path with a sink: where the footer line starts (-1: not in this
        chunk), or None when the lines are not whole events."""
        footer = find_end_mark(buf, FOOTER_MARK, self._bpos, newline)
        end = newline
        if footer >= 0:  # the footer (or a line after it): the general path checks
            end = buf.rfind(b"\n", self._bpos, footer) + 1 or self._bpos
        if not self._sink_block(buf, end, newline + 1 if footer < 0 else end):
            return None
        return footer

    def feed(self, block_sink, event_sink):
        """Reads the whole stream into a consumer of event text (the native summary engine)
        instead of decoding it here: the fast path's blocks of whole event lines go to
        block_sink(chunk, start, end) (the lines are chunk[start:end]; it returns the number of
        events it read, or None: not whole events, read that part by the general path), the
        general path's events to event_sink(event)."""
        for batch, _ in self.sink_batches(block_sink):
            for event in batch:
                event_sink(event)

    def sink_batches(self, block_sink):
        """feed() as a generator of the general path's batches: the fast path's blocks go to
        block_sink as in feed(), and after each one it yields an empty batch, so the caller can
        act on each block as it is read (merge writes it)."""
        self._block_sink = block_sink
        try:
            yield from self.batches()
        finally:
            self._block_sink = None

    def _decoded(self, body):
        """The events of body (whole events and separators between them), or None when it is
        not a JSON array's items."""
        try:
            events = decode_batch(b"[" + body + b"]")
        except BATCH_ERRORS:
            return None
        return events if type(events) is list else None

    # -- Chrome -----------------------------------------------------------------------------
    def _read_chrome_header(self):
        while True:  # the header is short: look no further than the first chunks
            match = _TRACE_EVENTS_KEY.search(self._bbuf)
            if match is not None or len(self._bbuf) > MAX_EVENT_CHARS or not self._fill_bytes():
                break
        if not self._bbuf.strip():
            raise self._empty()
        header = None if match is None else parse_chrome_header(as_text(self._bbuf[: match.end()]))
        if header is None:
            raise self._no_header()
        self._consume(match.end())
        self.keep_end = self._offset + self._bpos
        return header

    def _no_header(self):
        """The error for a Chrome file without a trace header (trace_damage.no_header): the
        file's start, or the whole file when it has at most DESCRIBE_BYTES."""
        while len(self._bbuf) < trace_damage.DESCRIBE_BYTES and self._fill_bytes():
            pass
        return trace_damage.no_header(self.path, self._bbuf, whole=self._beof)  # all unread

    def _chrome_batches(self):
        while not self._text_mode:
            buf = self._bbuf
            newline = buf.rfind(b"\n", self._bpos)
            if newline < 0:
                if self._fill_bytes():
                    continue  # no complete line yet
                break
            if self._block_sink is not None:
                tail = self._sink_chrome_block(buf, newline)
                if tail is None:
                    break  # not whole events in the core's layout: the general path
                if tail >= 0:
                    break  # the tail: read by the general path
                yield [], None  # the sink took a block: the caller's turn (sink_batches)
                continue
            block = buf[self._bpos : newline]
            tail = block.find(b"\n]")
            if tail < 0 and _LEADING_BRACKET.match(block):  # (no copy of the block)
                tail = 0
            body = block if tail < 0 else block[:tail]
            stripped = body.strip()
            if stripped.endswith(b","):
                stripped = stripped[:-1]
            if stripped:
                events, n = self._block(stripped, stripped)
                if n is None:
                    break  # not whole events in the core's layout: the general path
                start = self._bpos + body.find(stripped[:1])
                first_line = self._line + buf.count(b"\n", self._bpos, start)
                lines_known = stripped.count(b"\n") + 1 == n
                self.keep_end = self._offset + start + len(stripped)
                self.events_read += n
                self._consume(newline + 1 if tail < 0 else self._bpos + tail)
                yield events, first_line if lines_known else None
            else:
                self._consume(newline + 1 if tail < 0 else self._bpos + tail)
            if tail >= 0:
                break  # the tail: read by the general path
        if not self._text_mode:
            self._to_text()
        for event in self._chrome_events():
            yield [event], None

    def _chrome_events(self):
        decode = DECODER.raw_decode
        skip = _SEPARATORS.match
        while True:
            self._pos = skip(self._buf, self._pos).end()
            if self._pos >= len(self._buf):
                if self._fill():
                    continue
                self.cut = True  # no closing ']' at all
                return
            if self._buf[self._pos] == "]":
                self._read_chrome_tail()
                return
            try:
                event, end = decode(self._buf, self._pos)
            except ValueError as error:
                # Refill only while less than MAX_EVENT_CHARS lies ahead: no event is that
                # long, so damage in the middle of a file never pulls the rest into memory.
                if len(self._buf) - self._pos < MAX_EVENT_CHARS and self._fill():
                    continue  # the event goes on in the next chunk
                self._cut_or_damaged(error)
                return
            self._pos = end
            self.keep_end = self._byte_offset_at(end)
            self.events_read += 1
            yield event

    def _read_chrome_tail(self):
        while self._fill():
            pass
        rest = self._buf[self._pos :]
        try:
            self.tail, self.after_events = parse_chrome_tail(rest)
        except ValueError:
            if "\n" in rest.strip():
                raise self._damaged_tail(rest) from None
            self.cut = True
            self.dropped_partial = True

    def _damaged_tail(self, rest):
        """rest (from the ']' closing traceEvents on) is no tail and more lines follow."""
        line = self._line_at(self._pos)
        after = _TAIL_PREFIX.match(rest).end()
        try:
            json.loads(_EMPTY_TAIL + rest[after:])  # as it is: no missing ',' supplied
        except ValueError as error:
            json_error = self._json_error(
                self._pos + after + error.pos - len(_EMPTY_TAIL), error.msg
            )
        else:
            json_error = None
        # The file as a whole was parsed as JSON (for the reason) only when it ends in a '}'.
        detail = f" ({json_error()})" if json_error and rest.rstrip().endswith("}") else ""
        return DamagedTrace(
            f"{self.path}: the text after traceEvents (line {line}) is not a "
            f"valid tail{detail} and more lines follow: the file is damaged; "
            "repair only completes cut-off traces",
            json_error,
        )

    def _cut_or_damaged(self, error):
        rest = self._buf[self._pos :]
        newline = rest.find("\n")
        if newline >= 0 and rest[newline:].strip():
            line = self._line_at(self._pos)
            raise DamagedTrace(
                f"{self.path}: line {line} is not valid JSON ({error.msg}) and "
                "more lines follow: the file is damaged, not just cut off; repair "
                "only completes cut-off traces",
                self._json_error(error.pos, error.msg),
            )
        self.cut = True
        self.dropped_partial = bool(rest.strip())

    # -- JSON Lines -------------------------------------------------------------------------
    def _read_jsonl_header(self):
        while True:
            newline = self._bbuf.find(b"\n", self._bpos)
            if newline < 0:
                if self._fill_bytes():
                    continue
                newline = len(self._bbuf)
            line = self._bbuf[self._bpos : newline]
            terminated = newline < len(self._bbuf)
            if not line.strip():
                if not terminated:
                    raise self._empty()
                self._consume(newline + 1)
                continue
            try:
                obj = json.loads(as_text(line))
            except ValueError as error:
                if not terminated:
                    raise TraceError(
                        f"{self.path}: no valid header (the first line is cut off)"
                        "; nothing to recover"
                    ) from None
                raise TraceError(
                    f"{self.path}: no valid header (line {self._line} is not JSON: "
                    f"{error.msg}); not an fqntrace .jsonl trace"
                ) from None
            if not isinstance(obj, dict) or obj.get("ph") != "header":
                raise TraceError(
                    f"{self.path}: no valid header (the first line must be "
                    '{"ph": "header", "schemaVersion": 1, ...}); '
                    "not an fqntrace .jsonl trace"
                )
            self.keep_end = self._offset + newline
            self._consume(min(newline + 1, len(self._bbuf)))
            return header_fields(obj, JSONL)

    def _jsonl_batches(self):
        while not self._text_mode:
            buf = self._bbuf
            newline = buf.rfind(b"\n", self._bpos)
            if newline < 0:
                if self._fill_bytes():
                    continue  # no complete line yet
                break
            if self._block_sink is not None:
                footer = self._sink_jsonl_block(buf, newline)
                if footer is None or footer >= 0:
                    break  # not whole events, or the footer: the general path
                yield [], None  # the sink took a block: the caller's turn (sink_batches)
                continue
            block = buf[self._bpos : newline]
            footer = block.find(FOOTER_MARK)
            if footer >= 0:  # the footer (or a line after it): the general path checks
                block = block[: block.rfind(b"\n", 0, footer) + 1]
                newline = self._bpos + len(block) - 1
            stripped = block.strip()
            if stripped:
                events, n = self._block(stripped, None)
                # One event a line, or not this layout: a newline inside a string (a damaged
                # line) became a comma in _block and would join two lines into one event.
                if n is None or stripped.count(b"\n") + 1 != n:
                    break
                start = self._bpos + block.find(stripped[:1])
                first_line = self._line + buf.count(b"\n", self._bpos, start)
                self.keep_end = self._offset + start + len(stripped)
                self.events_read += n
                self._consume(newline + 1)
                yield events, first_line
            else:
                self._consume(newline + 1)
            if footer >= 0:
                break
        if not self._text_mode:
            self._to_text()
        # Each line is one event: its line is known, unless a sink took blocks uncounted.
        line = self._line if self._block_sink is None else None
        for event, skipped in self._jsonl_events():
            if line is not None:
                line += skipped
            yield [event], line
            if line is not None:
                line += 1

    def _lines(self):
        """General path: (line, terminated, end) for each line of the rest, in chunks."""
        while True:
            newline = self._buf.find("\n", self._pos)
            if newline < 0:
                if self._fill():
                    continue
                if self._pos < len(self._buf):
                    line = self._buf[self._pos :]
                    self._pos = len(self._buf)
                    yield line, False, self._pos
                return
            line = self._buf[self._pos : newline]
            self._pos = newline + 1
            yield line, True, newline

    def _jsonl_events(self):
        """General path: (event, lines skipped since the last event) of the rest."""
        loads = json.loads
        skipped = 0
        for line, terminated, end in self._lines():
            if not line.strip():
                skipped += 1
                continue
            try:
                obj = loads(line)
            except ValueError as error:
                if not terminated:
                    self.cut = True
                    self.dropped_partial = True
                    return
                raise TraceError(
                    f"{self.path}: line {self._line_at(end - len(line))} is not "
                    f"valid JSON ({error.msg}) and more lines follow: the file is "
                    "damaged, not just cut off; repair only completes cut-off "
                    "traces"
                ) from None
            if self.tail is not None:
                raise TraceError(
                    f"{self.path}: line {self._line_at(end - len(line))} follows "
                    "the footer line: two traces were written into one file; keep "
                    "one"
                )
            if isinstance(obj, dict) and obj.get("ph") == "footer":
                self.tail = {k: v for k, v in obj.items() if k != "ph"}
                skipped += 1
                continue
            self.keep_end = self._byte_offset_at(end)
            self.events_read += 1
            yield obj, skipped
            skipped = 0
        if self.tail is None:
            self.cut = True


def events(path):
    """(stream, iterator of events): the stream's header is read; its tail once iterated."""
    stream = TraceStream(path)
    return stream, iter(stream)


def may_miss_events(cut, tail):
    """May events be missing: cut off, repaired, or the writer dropped events?"""
    if cut or not isinstance(tail, dict):
        return True
    if tail.get("complete") is False:
        return True
    dropped = tail.get("dropped_events")
    return isinstance(dropped, int) and dropped > 0
