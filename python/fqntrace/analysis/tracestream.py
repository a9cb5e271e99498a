"""The one reader of trace files: every verb reads a trace through it, one batch of events at a
time, in memory bounded by a read chunk (4 MiB) and one event, never by the file. `top` follows a
growing file with ``Follower`` below. On top of the stream: ``load`` collects a whole trace for a
verb that needs every event at once, ``read_text`` reads another JSON file whole (a
torch.profiler trace to annotate, a summary).

* Chrome trace (``.json``): the header up to ``"traceEvents": [``, then the events (the core
  writes one per line, joined by ``,\\n``), then the tail ``], "fqntrace": {...}}``, written only
  at normal exit. After a crash the file stops anywhere, possibly inside a line.
* JSON Lines (``.jsonl``): a ``{"ph": "header", ...}`` line, event lines, a ``{"ph": "footer",
  ...}`` line at normal exit.
* gzip (either format; any file starting with gzip's magic bytes): decompressed on the fly. The
  core sync-flushes the compressor at every periodic flush, so a gzip stream cut off by a crash
  ends where its data ends, and is then read as any cut-off text.

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
decompressed text). The line and column of damage are counted only when it is reported, by
reading the file again.
"""
import codecs
import functools
import json
import os
import re
import zlib

from fqntrace.analysis.errors import DamagedTrace, NotATrace, TraceError, describe_json_error

try:  # a decoder made for bulk JSON: ~2x the standard library's speed on the core's lines
    from msgspec.json import decode as _decode_batch
    _BATCH_ERRORS = (ValueError, __import__("msgspec").DecodeError)
except ImportError:  # pragma: no cover - the standard library's C decoder, same results
    _decode_batch = json.loads
    _BATCH_ERRORS = (ValueError,)

CHROME = "chrome"
JSONL = "jsonl"
GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 22  # 4 MiB per read
MAX_EVENT_CHARS = 1 << 24  # far more than any event (shapes included) takes
# What a file with no trace header is, and where a damaged file's JSON first breaks, is told by
# reading it whole: only a file of up to this much text (an error's detail, never the reading).
DESCRIBE_BYTES = 32 << 20
_DECODER = json.JSONDecoder()
_SEPARATORS = re.compile(r"[\s,]*")
_TAIL_PREFIX = re.compile(r"\]\s*")
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_TRACE_EVENTS_TEXT_KEY = re.compile(r'"traceEvents"\s*:\s*\[')
_EMPTY_TAIL = '{"traceEvents": []'
_FOOTER_MARK = b'"footer"'
_END_MARK_WINDOW = 1 << 16
_LEADING_BRACKET = re.compile(rb"\s*\]")


def is_gzip(path):
    """Is `path` named as a gzip file (it is written gzip-compressed; a file is read as gzip by
    its first bytes)?"""
    return str(path).lower().endswith(".gz")


def base_name(path):
    """The path without a trailing .gz: what the format is detected from."""
    text = str(path)
    return text[:-3] if is_gzip(text) else text


def _text(data):
    """Bytes as text. Invalid UTF-8 is kept byte-exact (surrogateescape), so a repair writes back
    exactly what it read; a character cut in half at the end lands in the dropped line."""
    return data.decode("utf-8", errors="surrogateescape")


def _check_not_binary(path, start):
    """Raises TraceError when the (decompressed) start of a file holds a NUL byte."""
    if b"\x00" in start[:4096]:
        raise TraceError(f"{path}: binary data, not a trace (fqntrace writes .json or .jsonl text)")


def open_trace(path):
    """The file opened for binary reading; a TraceError whose one line says what to do when it
    cannot be."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied (check the file's permissions)") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read ({error.strerror or error})") from None


class ByteSource:
    """A file's bytes in chunks; a gzip file (by its first bytes, whatever its name) decompressed
    with zlib as it is read, so a gzip stream cut off by a crash gives every byte that was
    written (GzipFile raises EOFError and loses the last read instead)."""

    def __init__(self, path):
        self.path = path
        self._file = open_trace(path)
        self._inflate = None
        self._first = True
        self._done = False
        self._inflated_any = False
        self._pending = b""

    def read(self):
        """The next chunk of bytes (at most CHUNK_BYTES, decompressed ones too), b'' at the
        end."""
        while True:
            if self._pending:  # compressed bytes not inflated yet
                data = self._inflate_some()
                if data:
                    return data
                continue
            if self._done:
                return b""
            try:
                data = self._file.read(CHUNK_BYTES if self._inflate is None else CHUNK_BYTES >> 3)
            except OSError as error:
                raise TraceError(f"{self.path}: cannot read ({error.strerror or error})") from None
            if not data:
                self._done = True
                return b""
            if self._first:
                self._first = False
                if data.startswith(GZIP_MAGIC):
                    self._inflate = zlib.decompressobj(wbits=31)
            if self._inflate is None:
                return data
            self._pending = data

    def _inflate_some(self):
        """Inflates the pending bytes, at most CHUNK_BYTES of output."""
        try:
            out = self._inflate.decompress(self._pending, CHUNK_BYTES)
        except zlib.error as error:
            if not self._inflated_any:
                raise TraceError(f"{self.path}: damaged gzip data ({error}); the file was not "
                                 "written by fqntrace or was overwritten") from None
            self._pending = b""
            self._done = True  # damaged compressed data: keep what was decoded
            return b""
        self._inflated_any = True
        if self._inflate.eof:  # another gzip member may follow
            self._pending = self._inflate.unused_data
            self._inflate = zlib.decompressobj(wbits=31)
        else:
            self._pending = self._inflate.unconsumed_tail
        return out

    def close(self):
        self._file.close()


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
            _check_not_binary(path, self._bbuf)
            self.format = self._detect()
            self.header = self._read_chrome_header() if self.format == CHROME else \
                self._read_jsonl_header()
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
        info = self.header.get("distributedInfo")
        return info.get("rank") if isinstance(info, dict) else None

    @property
    def incomplete(self):
        return _incomplete(self.cut, self.tail)

    def _line_at(self, pos):
        """General path: the line of _buf[pos], for a message."""
        return _positions(self.path, self._byte_offset_at(pos))[0][0]

    def _json_error(self, pos, reason):
        """Where the JSON first breaks, found when asked (validate says it): see _json_error_at."""
        return functools.partial(_json_error_at, self.path, self._byte_offset_at(pos), reason)

    def _fill_bytes(self):
        """Appends the next chunk to the byte buffer (dropping what was consumed)."""
        if self._beof:
            return False
        chunk = self._source.read()
        if not chunk:
            self._beof = True
            return False
        self._offset += self._bpos
        self._bbuf = self._bbuf[self._bpos:] + chunk
        self._bpos = 0
        return True

    def _to_text(self):
        """From here on the general path: the unread bytes become text."""
        self._text_mode = True
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._text_base = self._offset + self._bpos  # byte offset of _buf[0]
        self._buf = self._decoder.decode(self._bbuf[self._bpos:], final=self._beof)
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
        self._buf = self._buf[self._pos:] + self._decoder.decode(chunk)
        self._counted -= self._pos
        self._pos = 0
        return True

    def _byte_offset_at(self, pos):
        """General path: the byte offset of _buf[pos] (pos never goes back)."""
        if pos > self._counted:
            self._text_bytes += len(self._buf[self._counted:pos].encode("utf-8",
                                                                         "surrogateescape"))
            self._counted = pos
        return self._text_bytes

    def _detect(self):
        name = base_name(self.path).lower()
        if name.endswith(".jsonl"):
            return JSONL
        if name.endswith(".json"):
            return CHROME
        while b"\n" not in self._bbuf and self._fill_bytes():
            pass
        first = self._bbuf.lstrip().split(b"\n", 1)[0]
        try:
            obj = json.loads(_text(first))
        except ValueError:
            return CHROME
        return JSONL if isinstance(obj, dict) and obj.get("ph") == "header" else CHROME

    def _empty(self):
        return TraceError(f"{self.path}: empty file (the traced program wrote nothing; "
                          "was it killed at start?)")

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
        tail = buf.find(b"\n]", max(self._bpos, newline - _END_MARK_WINDOW), newline)
        if tail < 0 and _LEADING_BRACKET.match(buf, self._bpos):
            tail = self._bpos
        end = newline if tail < 0 else tail
        if not self._sink_block(buf, end, newline + 1 if tail < 0 else end):
            return None
        return tail

    def _sink_jsonl_block(self, buf, newline):
        """The JSON Lines fast path with a sink: where the footer line starts (-1: not in this
        chunk), or None when the lines are not whole events."""
        footer = buf.find(_FOOTER_MARK, max(self._bpos, newline - _END_MARK_WINDOW), newline)
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
            events = _decode_batch(b"[" + body + b"]")
        except _BATCH_ERRORS:
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
        obj = None
        if match is not None:
            try:
                obj = json.loads(_text(self._bbuf[:match.end()]) + "]}")
            except ValueError:
                pass
        if not isinstance(obj, dict):
            raise self._no_header()
        self._consume(match.end())
        self.keep_end = self._offset + self._bpos
        return {k: v for k, v in obj.items() if k not in ("traceEvents", "fqntrace")}

    def _no_header(self):
        """The error for a Chrome file without a trace header. A file of up to DESCRIBE_BYTES is
        read whole to say what it is: JSON of another kind (NotATrace), or where its JSON
        breaks."""
        while len(self._bbuf) < DESCRIBE_BYTES and self._fill_bytes():
            pass
        text = _text(self._bbuf) if self._beof else None  # nothing was consumed yet
        json_error = None
        if text is not None:
            try:
                document = json.loads(text)
            except ValueError as error:
                json_error = describe_json_error(error)
            else:
                if not isinstance(document, dict):
                    return NotATrace(f"{self.path}: not a trace (the JSON is a "
                                     f"{type(document).__name__}, not an object with "
                                     "traceEvents)", document)
                if not isinstance(document.get("traceEvents"), list):
                    return NotATrace(f"{self.path}: not a trace (no traceEvents list)", document)
        if not self._bbuf.lstrip().startswith(b"{"):
            detail = f" ({json_error})" if json_error else ""
            return DamagedTrace(f"{self.path}: not valid JSON{detail}; not a trace file",
                                json_error)
        stripped = text.strip() if text is not None else ""
        return DamagedTrace(f"{self.path}: no valid header (the file must start with "
                            "'{\"schemaVersion\": 1, ... \"traceEvents\": ['); it was cut off "
                            "before the header was complete or is not an fqntrace trace, nothing "
                            "to recover", json_error,
                            header_cut=stripped.startswith('{"schemaVersion"')
                            and "\n" not in stripped)

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
            block = buf[self._bpos:newline]
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
        decode = _DECODER.raw_decode
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
        rest = self._buf[self._pos:]
        after = _TAIL_PREFIX.match(rest).end()
        try:
            obj = json.loads(_EMPTY_TAIL + (", " if rest[after:after + 1] not in (",", "}")
                                            else "") + rest[after:])
        except ValueError:
            if "\n" in rest.strip():
                raise self._damaged_tail(rest, after) from None
            self.cut = True
            self.dropped_partial = True
            return
        tail = obj.get("fqntrace") if isinstance(obj, dict) else None
        self.tail = tail if isinstance(tail, dict) else {}
        self.after_events = {k: v for k, v in obj.items() if k not in ("traceEvents", "fqntrace")}

    def _damaged_tail(self, rest, after):
        """rest (from the ']' closing traceEvents on) is no tail and more lines follow."""
        line = self._line_at(self._pos)
        try:
            json.loads(_EMPTY_TAIL + rest[after:])  # as it is: no missing ',' supplied
        except ValueError as error:
            json_error = self._json_error(self._pos + after + error.pos - len(_EMPTY_TAIL),
                                          error.msg)
        else:
            json_error = None
        # The file as a whole was parsed as JSON (for the reason) only when it ends in a '}'.
        detail = f" ({json_error()})" if json_error and rest.rstrip().endswith("}") else ""
        return DamagedTrace(f"{self.path}: the text after traceEvents (line {line}) is not a "
                            f"valid tail{detail} and more lines follow: the file is damaged; "
                            "repair only completes cut-off traces", json_error)

    def _cut_or_damaged(self, error):
        rest = self._buf[self._pos:]
        newline = rest.find("\n")
        if newline >= 0 and rest[newline:].strip():
            line = self._line_at(self._pos)
            raise DamagedTrace(f"{self.path}: line {line} is not valid JSON ({error.msg}) and "
                               "more lines follow: the file is damaged, not just cut off; repair "
                               "only completes cut-off traces",
                               self._json_error(error.pos, error.msg))
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
            line = self._bbuf[self._bpos:newline]
            terminated = newline < len(self._bbuf)
            if not line.strip():
                if not terminated:
                    raise self._empty()
                self._consume(newline + 1)
                continue
            try:
                obj = json.loads(_text(line))
            except ValueError as error:
                if not terminated:
                    raise TraceError(f"{self.path}: no valid header (the first line is cut off)"
                                     "; nothing to recover") from None
                raise TraceError(f"{self.path}: no valid header (line {self._line} is not JSON: "
                                 f"{error.msg}); not an fqntrace .jsonl trace") from None
            if not isinstance(obj, dict) or obj.get("ph") != "header":
                raise TraceError(f"{self.path}: no valid header (the first line must be "
                                 '{"ph": "header", "schemaVersion": 1, ...}); '
                                 "not an fqntrace .jsonl trace")
            self.keep_end = self._offset + newline
            self._consume(min(newline + 1, len(self._bbuf)))
            return {k: v for k, v in obj.items() if k != "ph"}

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
            block = buf[self._bpos:newline]
            footer = block.find(_FOOTER_MARK)
            if footer >= 0:  # the footer (or a line after it): the general path checks
                block = block[:block.rfind(b"\n", 0, footer) + 1]
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
                    line = self._buf[self._pos:]
                    self._pos = len(self._buf)
                    yield line, False, self._pos
                return
            line = self._buf[self._pos:newline]
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
                raise TraceError(f"{self.path}: line {self._line_at(end - len(line))} is not "
                                 f"valid JSON ({error.msg}) and more lines follow: the file is "
                                 "damaged, not just cut off; repair only completes cut-off "
                                 "traces") from None
            if self.tail is not None:
                raise TraceError(f"{self.path}: line {self._line_at(end - len(line))} follows "
                                 "the footer line: two traces were written into one file; keep "
                                 "one")
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


def _positions(path, *offsets):
    """(line, column) of each byte offset of the file's text (ascending), as json counts them,
    for a message. Counted by reading the file again: only an error needs them, so reading the
    core's lines counts nothing."""
    found = []
    source = ByteSource(path)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    line, column, done, rest = 1, 1, 0, b""
    try:
        for offset in offsets:
            while done < offset:
                data = rest or source.read()
                if not data:
                    break
                rest = data[offset - done:]
                data = data[:offset - done]
                done += len(data)
                newline = data.rfind(b"\n")
                if newline >= 0:
                    line += data.count(b"\n")
                    decoder.reset()  # a newline never splits a character
                    column = 1 + len(decoder.decode(data[newline + 1:]))
                else:
                    column += len(decoder.decode(data))
            found.append((line, column))
    finally:
        source.close()
    return found


def _json_error_at(path, offset, reason):
    """Where the JSON of a damaged file first breaks, as "reason: line L column C": json's own
    verdict on the whole text when the file has at most DESCRIBE_BYTES (the stream passes what
    json does not, a missing ',' between events, so it may have stopped later), else `reason`
    at byte `offset`, where the stream stopped."""
    source = ByteSource(path)
    chunks, size = [], 0
    try:
        while size <= DESCRIBE_BYTES:
            data = source.read()
            if not data:
                try:
                    json.loads(_text(b"".join(chunks)))
                except ValueError as error:
                    return describe_json_error(error)
                break
            chunks.append(data)
            size += len(data)
    finally:
        source.close()
    line, column = _positions(path, offset)[0]
    return f"{reason}: line {line} column {column}"


def events(path):
    """(stream, iterator of events): the stream's header is read; its tail once iterated."""
    stream = TraceStream(path)
    return stream, iter(stream)


def _incomplete(cut, tail):
    """May events be missing: cut off, repaired, or the writer dropped events?"""
    if cut or not isinstance(tail, dict):
        return True
    if tail.get("complete") is False:
        return True
    dropped = tail.get("dropped_events")
    return isinstance(dropped, int) and dropped > 0


# ---------------------------------------------------------------------------------------------
# Whole files, on top of the stream


class Trace:
    """One trace file in memory (``load``).

    header: the top-level fields (Chrome: everything but traceEvents and the fqntrace tail;
            JSONL: the header line without its "ph").
    events: the event objects, in file order.
    tail:   the ``fqntrace`` tail object (Chrome) or the footer line (JSONL); None if cut off.
    cut:    the file stops before its tail (its complete events are kept).
    dropped_partial: a partial last line was dropped (only when cut).
    event_lines: the 1-based line of each event, when every event has a line of its own.
    """

    def __init__(self, path, fmt, header, events, tail, cut=False, dropped_partial=False,
                 event_lines=None):
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
        return _incomplete(self.cut, self.tail)

    @property
    def rank(self):
        info = self.header.get("distributedInfo")
        return info.get("rank") if isinstance(info, dict) else None

    def slices(self):
        """The complete ("X") events."""
        return [e for e in self.events if isinstance(e, dict) and e.get("ph") == "X"]


def load(path):
    """The whole trace in memory (a Trace), read by the stream: for a verb that needs every
    event at once (nesting a file whose threads are not in end order). Raises TraceError as the
    stream does."""
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
        return Trace(path, stream.format, header, events, stream.tail, cut=stream.cut,
                     dropped_partial=stream.dropped_partial, event_lines=lines)


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
    _check_not_binary(path, data)
    return _text(data)


def lines_with(path, mark):
    """The events on the lines of a trace that contain the bytes `mark` (its ProfilerStep
    ranges, say), found by a byte search, not by decoding every event: a list, or None when a
    line holding the mark is not one whole event (not the core's layout: decode it all).
    Each chunk is searched where it was read (no copy of it): only the line that spans two
    chunks is put together."""
    source = ByteSource(path)
    out = []
    rest = b""  # the start of a line the last chunk did not end

    def take(line, last):
        """False when the line is not one whole event (a partial last line is skipped)."""
        line = line.strip()
        if line.endswith(b","):
            line = line[:-1]
        try:
            event = _decode_batch(line)
        except _BATCH_ERRORS:
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
            at = chunk.find(mark, first, last)
            while at >= 0:
                start = chunk.rfind(b"\n", 0, at) + 1
                end = chunk.find(b"\n", at)
                if not take(chunk[start:end], False):
                    return None
                at = chunk.find(mark, end, last)
            rest = chunk[last + 1:]
    finally:
        source.close()


# ---------------------------------------------------------------------------------------------
# Following a growing file


class Follower:
    """What a running job appends to one trace file, as parsed events, a read at a time.

    poll() returns the events completed since the last call. It never reads a byte twice and
    keeps at most one partial line. The file may not exist yet (``state`` says so), may be
    replaced by a new run (a new inode, or the file got shorter: the reader starts over and
    ``restarts`` counts it) and may be .gz (decompressed as it grows)."""

    MAX_READ = 1 << 21  # bytes per poll: a backlog is parsed a slice at a time

    def __init__(self, path):
        self.path = path
        self.gzip = is_gzip(path)
        self.state = "waiting"  # waiting (no file yet), reading, ended (tail seen), damaged
        self.header = None
        self.tail = None
        self.restarts = 0
        self.bad_lines = 0
        self.bytes_read = 0
        self._file = None
        self._inode = None
        self._offset = 0
        self._partial = b""
        self._inflate = None
        self.format = JSONL if base_name(path).lower().endswith(".jsonl") else CHROME

    @property
    def offset(self):
        """Bytes of the file read so far."""
        return self._offset

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def _reset(self):
        self.close()
        self._offset = 0
        self._partial = b""
        self.header = None
        self.tail = None
        self._inflate = zlib.decompressobj(wbits=31) if self.gzip else None

    def _open(self):
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            self.state = "waiting"
            return False
        except OSError as error:
            raise TraceError(f"{self.path}: cannot read ({error.strerror or error})") from None
        self._reset()
        self._file = f
        self._inode = os.fstat(f.fileno()).st_ino
        self.state = "reading"
        return True

    def _replaced(self):
        """True when the path now names another file (rotated, a new run) or the file shrank."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # removed: keep what we have until a new one appears
        return st.st_ino != self._inode or st.st_size < self._offset

    def poll(self):
        """The events appended since the last poll (a list), and whether the file restarted."""
        data, end, restarted = self.read_lines()
        return (self._parse_lines(data[:end].split(b"\n")) if end > 0 else []), restarted

    def read_lines(self):
        """poll()'s read: (data, end, restarted) with data[:end] the whole lines appended since
        the last read (end 0: none); parse them with poll_events()."""
        restarted = False
        if self._file is None:
            if not self._open():
                return b"", 0, False
        elif self.state == "damaged" and not self._replaced():
            return b"", 0, False
        elif self._replaced():
            self.restarts += 1
            restarted = True
            if not self._open():
                return b"", 0, True
        # a .gz poll reads an eighth: the text it inflates to stays near MAX_READ (ByteSource too)
        data = self._file.read(self.MAX_READ if self._inflate is None else self.MAX_READ >> 3)
        if not data:
            return b"", 0, restarted
        self._offset += len(data)
        self.bytes_read += len(data)
        if self._inflate is not None:
            out = []
            try:
                while data:
                    out.append(self._inflate.decompress(data))
                    if not self._inflate.eof:
                        break
                    data = self._inflate.unused_data  # another gzip member follows
                    self._inflate = zlib.decompressobj(wbits=31)
            except zlib.error:
                self.bad_lines += 1
                self.state = "damaged"  # damaged compressed data: nothing more can be read
            data = b"".join(out)
        data = self._partial + data
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = data
            return b"", 0, restarted
        self._partial = data[end + 1:]
        return data, end, restarted

    def poll_events(self, data, end, block_sink):
        """The lines data[:end] of read_lines() for a consumer of event text (the native
        engine): the run of whole event lines between the header and the tail or footer goes
        to block_sink(data, start, stop) (it returns how many events it took, or None when they
        are not whole events: then they are parsed here); returns (the events parsed here,
        how many the sink took)."""
        start = 0
        events = []
        while self.header is None and start < end:  # the header line (the first read)
            newline = data.find(b"\n", start, end)
            stop = end if newline < 0 else newline
            events += self._parse_lines([data[start:stop]])
            start = stop + 1
        if start >= end:
            return events, 0
        mark = data.find(_FOOTER_MARK if self.format == JSONL else b"\n]", start, end)
        if self.format == CHROME and data[start:start + 1] == b"]":
            mark = start
        stop = end if mark < 0 else data.rfind(b"\n", start, mark + 1) + 1 or start
        taken = block_sink(data, start, stop) if stop > start else 0
        if taken is None:
            events += self._parse_lines(data[start:stop].split(b"\n"))
            taken = 0
        if stop < end:  # the tail or footer (or what is after it)
            events += self._parse_lines(data[stop:end].split(b"\n"))
        return events, taken

    def _parse_lines(self, lines):
        out = []
        decode = _DECODER.raw_decode
        fast = _decode_batch
        for raw in lines:
            if raw[:2] == b'{"' and self.header is not None:  # an event line of the core's
                body = raw.rstrip()
                try:
                    obj = fast(body[:-1] if body[-1:] == b"," else body)
                except _BATCH_ERRORS:
                    obj = None
                if type(obj) is dict and obj.get("ph") != "footer":
                    out.append(obj)
                    continue
            line = raw.decode("utf-8", errors="surrogateescape").strip()
            if not line:
                continue
            if line.endswith(","):
                line = line[:-1]
            first = line[:1]
            if first == "{" and self.header is None:
                self._header_line(line)
                continue
            if first == "]":
                self._chrome_tail(line)
                continue
            try:
                obj, end = decode(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if end != len(line):
                self.bad_lines += 1
                continue
            if isinstance(obj, dict):
                if obj.get("ph") == "footer":
                    self.tail = obj
                    self.state = "ended"
                    continue
                out.append(obj)
        return out

    def _header_line(self, text):
        match = _TRACE_EVENTS_TEXT_KEY.search(text)
        try:
            obj = json.loads(text[:match.end()] + "]}" if match else text)
        except ValueError:
            obj = None
        self.header = obj if isinstance(obj, dict) else {}

    def _chrome_tail(self, line):
        text = line[1:].strip()
        try:
            obj = json.loads('{"traceEvents": []' + text)
        except ValueError:
            obj = {}
        tail = obj.get("fqntrace") if isinstance(obj, dict) else None
        self.tail = tail if isinstance(tail, dict) else {}
        self.state = "ended"
