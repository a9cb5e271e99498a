"""Following a growing trace file (`top`): what a running job appends, a read at a time, parsed
with the stream's header, tail and event decoder (tracestream) and inflated by the same gzip
inflater (trace_bytes), so a followed file and a file read whole mean the same."""

import json
import os
import re
import zlib

from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_bytes import GzipInflater, as_text
from fqntrace.analysis.trace_format import (
    CHROME,
    FOOTER_MARK,
    JSONL,
    format_by_name,
    header_fields,
    is_gzip,
    parse_chrome_header,
    parse_chrome_tail,
)
from fqntrace.analysis.tracestream import BATCH_ERRORS, DECODER, decode_batch, find_end_mark

# The header of a Chrome trace is its first line, up to this key (the events follow it).
_TRACE_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


class Follower:
    """What a running job appends to one trace file, as parsed events, a read at a time.

    read_lines() returns the whole lines appended since the last call, poll_events() parses
    them. It never reads a byte twice and keeps at most one partial line. The file may not
    exist yet (``state`` says so), may be replaced by a new run (a new inode, or the file got
    shorter: the reader starts over) and may be .gz (inflated as it grows)."""

    MAX_READ = 1 << 21  # bytes per read: a backlog is parsed a slice at a time

    def __init__(self, path):
        self.path = path
        self.gzip = is_gzip(path)
        self.state = "waiting"  # waiting (no file yet), reading, ended (tail seen), damaged
        self.header = None
        self.tail = None
        self.bad_lines = 0
        self._file = None
        self._inode = None
        self._offset = 0
        self._partial = b""
        self._inflater = None
        self.format = format_by_name(path) or CHROME

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
        self._inflater = GzipInflater() if self.gzip else None

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

    def read_lines(self):
        """(data, end, restarted) with data[:end] the whole lines appended since the last read
        (end 0: none); parse them with poll_events()."""
        restarted = False
        if self._file is None:
            if not self._open():
                return b"", 0, False
        elif self.state == "damaged" and not self._replaced():
            return b"", 0, False
        elif self._replaced():
            restarted = True
            if not self._open():
                return b"", 0, True
        # a .gz read takes an eighth: the text it inflates to stays near MAX_READ (as ByteSource)
        data = self._file.read(self.MAX_READ if self._inflater is None else self.MAX_READ >> 3)
        if not data:
            return b"", 0, restarted
        self._offset += len(data)
        if self._inflater is not None:
            data = self._inflate(data)
        data = self._partial + data
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = data
            return b"", 0, restarted
        self._partial = data[end + 1 :]
        return data, end, restarted

    def _inflate(self, data):
        """The text of the compressed bytes read, every member of it; damaged data ends the
        reading (state "damaged") and keeps the text inflated before it."""
        self._inflater.pending = data
        out = []
        try:
            while self._inflater.pending:
                out.append(self._inflater.inflate())
        except zlib.error:
            self.bad_lines += 1
            self.state = "damaged"  # nothing more can be read
        return b"".join(out)

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
        mark = find_end_mark(data, FOOTER_MARK if self.format == JSONL else b"\n]", start, end)
        if self.format == CHROME and data[start : start + 1] == b"]":
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
        decode = DECODER.raw_decode
        for raw in lines:
            if raw[:2] == b'{"' and self.header is not None:  # an event line of the core's
                body = raw.rstrip()
                try:
                    obj = decode_batch(body[:-1] if body[-1:] == b"," else body)
                except BATCH_ERRORS:
                    obj = None
                if type(obj) is dict and obj.get("ph") != "footer":
                    out.append(obj)
                    continue
            line = as_text(raw).strip()
            if not line:
                continue
            if line.endswith(","):
                line = line[:-1]
            first = line[:1]
            if first == "{" and self.header is None:
                self._read_header(line)
                continue
            if first == "]":
                self._read_chrome_tail(line)
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

    def _read_header(self, line):
        """The header from the first line: a Chrome trace's up to its traceEvents key, else the
        whole line's object (a JSON Lines header line); {} when it is neither."""
        match = _TRACE_EVENTS_KEY.search(line)
        if match:
            header = parse_chrome_header(line[: match.end()])
        else:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            header = header_fields(obj, self.format) if isinstance(obj, dict) else None
        self.header = {} if header is None else header

    def _read_chrome_tail(self, line):
        try:
            self.tail = parse_chrome_tail(line)[0]
        except ValueError:
            self.tail = {}
        self.state = "ended"
