"""Reading a trace one event at a time, in memory bounded by one event (and a read chunk), not by
the file: the reader `summary` (one or many ranks) uses, and what `top` follows a growing file
with. traceio loads whole files for the verbs that need every event at once (validate, merge,
repair); this module shares its rules for the layout and for cut-off files.

* Chrome trace (``.json``): the header up to ``"traceEvents": [``, then events decoded one by one
  with ``json.JSONDecoder.raw_decode`` over chunks of text, so any layout works (the core's one
  event per line, one long line, pretty-printed), then the tail. A file that stops before its
  tail is *cut*: every complete event is read and a partial last line is dropped; damage followed
  by more lines is a DamagedTrace.
* JSON Lines (``.jsonl``): a header line, event lines, a footer line.
* ``.gz`` (either format): decompressed on the fly; a gzip stream cut off by a crash ends where
  its data ends.

``Follower`` reads what a running job has appended since the last call (the bytes, through a
decompressor for ``.gz``) and hands back the complete lines: the core writes one event per line.
"""
import codecs
import json
import os
import re
import zlib

from fqntrace import traceio
from fqntrace.traceio import CHROME, JSONL, DamagedTrace, TraceError, open_trace

CHUNK_BYTES = 1 << 22  # 4 MiB per read
CHUNK_CHARS = CHUNK_BYTES
MAX_EVENT_CHARS = 1 << 24  # far more than any event (shapes included) takes
_DECODER = json.JSONDecoder()
_SEPARATORS = re.compile(r"[\s,]*")
_TAIL_PREFIX = re.compile(r"\]\s*")


def is_gzip(path):
    return path.lower().endswith(".gz")


def base_name(path):
    """The path without a trailing .gz: what the format is detected from."""
    return path[:-3] if is_gzip(path) else path


class _TextSource:
    """A file's text in chunks; a .gz file decompressed with zlib as it is read, so a gzip
    stream cut off by a crash gives every byte that was written (GzipFile raises EOFError and
    loses the last read instead). Invalid UTF-8 is kept (surrogateescape), as traceio does."""

    def __init__(self, path):
        self.path = path
        self._file = open_trace(path)
        self._inflate = zlib.decompressobj(wbits=31) if is_gzip(path) else None
        self._text = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._done = False
        self._inflated_any = False

    def read(self):
        """The next chunk of text, '' at the end."""
        while not self._done:
            try:
                data = self._file.read(CHUNK_BYTES)
            except OSError as error:
                raise TraceError(f"{self.path}: cannot read ({error.strerror or error})") from None
            if not data:
                self._done = True
                return self._text.decode(b"", final=True)
            if self._inflate is not None:
                data = self._inflate_some(data)
            text = self._text.decode(data)
            if text:
                return text
        return ""

    def _inflate_some(self, data):
        out = []
        while data:
            try:
                out.append(self._inflate.decompress(data))
            except zlib.error:
                if not self._inflated_any:
                    raise TraceError(f"{self.path}: not a gzip file (a .gz trace is written by "
                                     "FQNTRACE=….json.gz)") from None
                self._done = True  # damaged compressed data: keep what was decoded
                break
            self._inflated_any = True
            data = self._inflate.unused_data
            if self._inflate.eof:  # another gzip member may follow
                self._inflate = zlib.decompressobj(wbits=31)
        return b"".join(out)

    def close(self):
        self._file.close()


class TraceStream:
    """One trace file read as a stream of events. Iterate it once for the events; afterwards
    ``tail`` (None if cut off), ``cut`` and ``dropped_partial`` are known. ``header`` is read
    when the stream is opened. Use as a context manager (or call close())."""

    def __init__(self, path):
        self.path = path
        self.tail = None
        self.cut = False
        self.dropped_partial = False
        self.events_read = 0
        self._file = _TextSource(path)
        self._buf = ""
        self._pos = 0
        self._eof = False
        try:
            self._fill()
            if self._file_is_binary():
                raise TraceError(f"{path}: binary data, not a trace (fqntrace writes .json or "
                                 ".jsonl text)")
            self.format = self._detect()
            self.header = self._read_chrome_header() if self.format == CHROME else \
                self._read_jsonl_header()
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------
    def close(self):
        self._file.close()

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
        return traceio.Trace(self.path, self.format, self.header, [], self.tail,
                             cut=self.cut).incomplete

    def _fill(self):
        """Appends the next chunk to the buffer (dropping what was consumed); False at the end."""
        if self._eof:
            return False
        chunk = self._file.read()
        if not chunk:
            self._eof = True
            return False
        self._buf = self._buf[self._pos:] + chunk
        self._pos = 0
        return True

    def _file_is_binary(self):
        return "\x00" in self._buf[:4096]

    def _detect(self):
        name = base_name(self.path).lower()
        if name.endswith(".jsonl"):
            return JSONL
        if name.endswith(".json"):
            return CHROME
        while "\n" not in self._buf and self._fill():
            pass
        first = self._buf.lstrip().split("\n", 1)[0]
        try:
            obj = json.loads(first)
        except ValueError:
            return CHROME
        return JSONL if isinstance(obj, dict) and obj.get("ph") == "header" else CHROME

    def _empty(self):
        return TraceError(f"{self.path}: empty file (the traced program wrote nothing; "
                          "was it killed at start?)")

    # -- Chrome -----------------------------------------------------------------------------
    def _read_chrome_header(self):
        while True:  # the header is short: look no further than the first chunks
            match = traceio.TRACE_EVENTS_KEY.search(self._buf)
            if match is not None or len(self._buf) > MAX_EVENT_CHARS or not self._fill():
                break
        if not self._buf.strip():
            raise self._empty()
        if match is None:
            if not self._buf.lstrip().startswith("{"):
                raise DamagedTrace(f"{self.path}: not valid JSON; not a trace file")
            raise DamagedTrace(f"{self.path}: no valid header (the file must start with "
                               "'{\"schemaVersion\": 1, ... \"traceEvents\": ['); it was cut off "
                               "before the header was complete or is not an fqntrace trace")
        try:
            obj = json.loads(self._buf[:match.end()] + "]}")
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise DamagedTrace(f"{self.path}: no valid header before \"traceEvents\"; not an "
                               "fqntrace trace")
        self._pos = match.end()
        return {k: v for k, v in obj.items() if k not in ("traceEvents", "fqntrace")}

    def __iter__(self):
        if self.format == JSONL:
            yield from self._jsonl_events()
        else:
            yield from self._chrome_events()

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
            self.events_read += 1
            yield event

    def _read_chrome_tail(self):
        while self._fill():
            pass
        rest = self._buf[self._pos:]
        after = _TAIL_PREFIX.match(rest).end()
        try:
            obj = json.loads('{"traceEvents": []' + (", " if rest[after:after + 1] not in
                                                       (",", "}") else "") + rest[after:])
        except ValueError as error:
            if "\n" in rest.strip():
                raise DamagedTrace(f"{self.path}: the text after traceEvents is not a valid tail "
                                   f"({error}) and more lines follow: the file is damaged") \
                    from None
            self.cut = True
            self.dropped_partial = True
            return
        tail = obj.get("fqntrace") if isinstance(obj, dict) else None
        self.tail = tail if isinstance(tail, dict) else {}

    def _cut_or_damaged(self, error):
        rest = self._buf[self._pos:]
        newline = rest.find("\n")
        if newline >= 0 and rest[newline:].strip():
            raise DamagedTrace(f"{self.path}: an event after event {self.events_read} is not "
                               f"valid JSON ({getattr(error, 'msg', error)}) and more lines "
                               "follow: the file is damaged, not just cut off; repair only "
                               "completes cut-off traces")
        self.cut = True
        self.dropped_partial = bool(rest.strip())

    # -- JSON Lines -------------------------------------------------------------------------
    def _lines(self):
        """(line, terminated) for each line of the file, in chunks."""
        while True:
            newline = self._buf.find("\n", self._pos)
            if newline < 0:
                if self._fill():
                    continue
                if self._pos < len(self._buf):
                    line = self._buf[self._pos:]
                    self._pos = len(self._buf)
                    yield line, False
                return
            line = self._buf[self._pos:newline]
            self._pos = newline + 1
            yield line, True

    def _read_jsonl_header(self):
        for line, terminated in self._lines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as error:
                if not terminated:
                    raise TraceError(f"{self.path}: no valid header (the first line is cut off)"
                                     "; nothing to recover") from None
                raise TraceError(f"{self.path}: no valid header (the first line is not JSON: "
                                 f"{error.msg}); not an fqntrace .jsonl trace") from None
            if not isinstance(obj, dict) or obj.get("ph") != "header":
                raise TraceError(f"{self.path}: no valid header (the first line must be "
                                 '{"ph": "header", "schemaVersion": 1, ...}); '
                                 "not an fqntrace .jsonl trace")
            return {k: v for k, v in obj.items() if k != "ph"}
        raise self._empty()

    def _jsonl_events(self):
        loads = json.loads
        for line, terminated in self._lines():
            if not line.strip():
                continue
            try:
                obj = loads(line)
            except ValueError as error:
                if not terminated:
                    self.cut = True
                    self.dropped_partial = True
                    return
                raise TraceError(f"{self.path}: a line after event {self.events_read} is not "
                                 f"valid JSON ({error.msg}) and more lines follow: the file is "
                                 "damaged, not just cut off") from None
            if self.tail is not None:
                raise TraceError(f"{self.path}: a line follows the footer line: two traces were "
                                 "written into one file; keep one")
            if isinstance(obj, dict) and obj.get("ph") == "footer":
                self.tail = {k: v for k, v in obj.items() if k != "ph"}
                continue
            self.events_read += 1
            yield obj
        if self.tail is None:
            self.cut = True


def events(path):
    """(stream, iterator of events): the stream's header is read; its tail once iterated."""
    stream = TraceStream(path)
    return stream, iter(stream)


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
        restarted = False
        if self._file is None:
            if not self._open():
                return [], False
        elif self.state == "damaged" and not self._replaced():
            return [], False
        elif self._replaced():
            self.restarts += 1
            restarted = True
            if not self._open():
                return [], True
        data = self._file.read(self.MAX_READ)
        if not data:
            return [], restarted
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
            return [], restarted
        self._partial = data[end + 1:]
        return self._parse_lines(data[:end].split(b"\n")), restarted

    def _parse_lines(self, lines):
        out = []
        decode = _DECODER.raw_decode
        for raw in lines:
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
        match = traceio.TRACE_EVENTS_KEY.search(text)
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
