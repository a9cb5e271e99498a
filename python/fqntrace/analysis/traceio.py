"""The whole-file reader of trace files: loads a file in memory, repairing a cut-off one.

Both formats the C++ core writes are handled:

* Chrome trace (``.json``): a header line ending in ``"traceEvents": [``, one event per line (lines
  joined by ``,\\n``), and a tail ``], "fqntrace": {...}}`` written only at normal exit. After a
  crash the file stops anywhere, possibly inside a line.
* JSON Lines (``.jsonl``): a ``{"ph": "header", ...}`` line, one event object per line, and a
  ``{"ph": "footer", ...}`` line at normal exit.

Either may be gzip-compressed (``.json.gz``, ``.jsonl.gz``, or any file starting with gzip's magic
bytes): the core sync-flushes the compressor at every periodic flush, so a file cut off by a crash
decompresses to a text cut off after its last flush, which is then read as any cut-off text.

A cut-off file is "repaired in memory": every complete event is kept and a partial last line is
dropped. Damage anywhere but at the end (a bad line followed by more lines) is not a cut and is
reported instead of guessed around.
"""
import json
import re
import zlib

from fqntrace.analysis.errors import DamagedTrace, NotATrace, TraceError, describe_json_error


CHROME = "chrome"
JSONL = "jsonl"
GZIP_MAGIC = b"\x1f\x8b"
GZIP_SUFFIX = ".gz"

TRACE_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')
_DECODER = json.JSONDecoder()


class Trace:
    """One loaded trace file.

    header: the top-level fields (Chrome: everything but traceEvents and the fqntrace tail;
            JSONL: the header line without its "ph").
    events: the event objects, in file order.
    tail:   the ``fqntrace`` tail object (Chrome) or the footer line (JSONL); None if cut off.
    cut:    the file stops before its tail (it was repaired in memory).
    dropped_partial: a partial last line was dropped (only when cut).
    keep_end: offset in the text just past the last complete event (where a repair closes it).
    event_lines: the 1-based line of each event, when known (for messages).
    """

    def __init__(self, path, fmt, header, events, tail, cut=False, dropped_partial=False,
                 keep_end=None, event_lines=None):
        self.path = path
        self.format = fmt
        self.header = header
        self.events = events
        self.tail = tail
        self.cut = cut
        self.dropped_partial = dropped_partial
        self.keep_end = keep_end
        self.event_lines = event_lines  # line number of each event, when known

    @property
    def incomplete(self):
        """True when events may be missing: cut off, repaired, or the writer dropped events."""
        if self.cut or not isinstance(self.tail, dict):
            return True
        if self.tail.get("complete") is False:
            return True
        dropped = self.tail.get("dropped_events")
        return isinstance(dropped, int) and dropped > 0

    @property
    def rank(self):
        info = self.header.get("distributedInfo")
        return info.get("rank") if isinstance(info, dict) else None

    def slices(self):
        """The complete ("X") events."""
        return [e for e in self.events if isinstance(e, dict) and e.get("ph") == "X"]


# ---------------------------------------------------------------------------------------------
# Files


def open_trace(path):
    """The file opened for binary reading; a TraceError whose one line says what to do when it
    cannot be (shared by both readers: this module's and tracestream's)."""
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


def read_text(path):
    """The file as text. Invalid UTF-8 is kept byte-exact (surrogateescape) so a repair writes
    back exactly what it read; a character cut in half at the end lands in the dropped line."""
    with open_trace(path) as f:
        try:
            data = f.read()
        except OSError as error:
            raise TraceError(f"{path}: cannot read ({error.strerror or error})") from None
    if data.startswith(GZIP_MAGIC):
        data = _gunzip(path, data)
    if b"\x00" in data[:4096]:
        raise TraceError(f"{path}: binary data, not a trace (fqntrace writes .json or .jsonl text)")
    return data.decode("utf-8", errors="surrogateescape")


def _gunzip(path, data):
    """The decompressed bytes of a gzip file, as far as they go: a stream cut off by a crash
    yields everything up to the cut (the core flushed the compressor at least every 0.5 s)."""
    out = []
    while data.startswith(GZIP_MAGIC):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(inflater.decompress(data))
        except zlib.error as error:
            if not out:
                raise TraceError(f"{path}: damaged gzip data ({error}); the file was not written "
                                 "by fqntrace or was overwritten") from None
            break
        if not inflater.eof:
            break  # cut off: keep what decoded
        data = inflater.unused_data  # another gzip member may follow
    return b"".join(out)


def plain_path(path):
    """`path` without a trailing .gz (the suffix that names the trace's format)."""
    text = str(path)
    return text[:-len(GZIP_SUFFIX)] if text.lower().endswith(GZIP_SUFFIX) else text


def detect_format(path, text):
    """JSONL by extension (.jsonl), else by content: a first line that is a whole header object."""
    lower = plain_path(path).lower()
    if lower.endswith(".jsonl"):
        return JSONL
    if lower.endswith(".json"):
        return CHROME
    first = text.lstrip().split("\n", 1)[0]
    try:
        obj = json.loads(first)
    except ValueError:
        return CHROME
    return JSONL if isinstance(obj, dict) and obj.get("ph") == "header" else CHROME


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def _only_whitespace_lines_follow(text, pos):
    """True if nothing but the current (last) line and whitespace remains from pos on."""
    newline = text.find("\n", pos)
    return newline < 0 or not text[newline:].strip()


# ---------------------------------------------------------------------------------------------
# Chrome traces


def load(path):
    """Loads a trace (either format), repairing a cut-off one in memory. Raises TraceError."""
    text = read_text(path)
    return parse(path, text)


def parse(path, text):
    if not text.strip():
        raise TraceError(f"{path}: empty file (the traced program wrote nothing; "
                         "was it killed at start?)")
    if detect_format(path, text) == JSONL:
        return parse_jsonl(path, text)
    return parse_chrome(path, text)


def parse_chrome(path, text):
    stripped = text.strip()
    if stripped.startswith("{") and not stripped.endswith("}"):
        # Cannot be a whole JSON object: cut off. Skip parsing it whole only to fail at the end.
        return parse_cut_chrome(path, text)
    try:
        obj = json.loads(text)
    except ValueError as error:
        return parse_cut_chrome(path, text, error)
    if not isinstance(obj, dict):
        raise NotATrace(f"{path}: not a trace (the JSON is a {type(obj).__name__}, not an object "
                        "with traceEvents)", obj)
    if not isinstance(obj.get("traceEvents"), list):
        raise NotATrace(f"{path}: not a trace (no traceEvents list)", obj)
    header, events, tail = _split_chrome(obj)
    return Trace(path, CHROME, header, events, tail if isinstance(tail, dict) else {})


def _split_chrome(obj):
    """(header, events, tail) of a Chrome trace object. The C++ core writes ``"fqntrace"`` only
    as the tail, after traceEvents and at normal exit, so it is never part of the header."""
    header = {k: v for k, v in obj.items() if k not in ("traceEvents", "fqntrace")}
    return header, obj.get("traceEvents"), obj.get("fqntrace")


def parse_cut_chrome(path, text, json_error=None):
    """A Chrome trace that is not valid JSON as a whole: a cut Trace if the file is a clean
    prefix of a trace (its last line may be partial), else TraceError saying what is wrong."""
    return _close_cut_chrome(path, text) or scan_chrome(path, text, json_error)


def _close_cut_chrome(path, text):
    """The fast way for a file cut off in its last line: close the text before that line (or the
    whole text) with ']}' and parse it in one go. None if that does not give a trace; the
    event-by-event scan then finds out what is wrong."""
    candidates = [len(text)]
    newline = len(text)
    for _ in range(2):
        newline = text.rfind("\n", 0, newline)
        if newline < 0:
            break
        candidates.append(newline)
    for end in candidates:
        head = text[:end].rstrip().rstrip(",").rstrip()
        if not head.endswith(("}", "[")):
            continue
        try:
            obj = json.loads(head + "]}")
        except ValueError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
            return None
        keep_end = len(head)
        if TRACE_EVENTS_KEY.search(text[:keep_end]) is None:
            return None
        if "\n" in text[keep_end:].strip(" \t\r\n,"):
            return None  # more than one line would be dropped: not a cut, let the scan say what
        header, events, _ = _split_chrome(obj)
        dropped = text[keep_end:].strip(" \t\r\n,") != ""
        return Trace(path, CHROME, header, events, None, cut=True, dropped_partial=dropped,
                     keep_end=keep_end)
    return None


def scan_chrome(path, text, json_error=None):
    """Event by event, for a Chrome trace that is not valid JSON as a whole. Returns a cut Trace
    when the file is a clean prefix of a trace; raises TraceError for anything else."""
    match = TRACE_EVENTS_KEY.search(text)
    header = None
    if match is not None:
        try:
            header = json.loads(text[:match.end()] + "]}")
        except ValueError:
            header = None
    if not isinstance(header, dict):
        if json_error is None:
            json_error = first_json_error(text)
        if not text.lstrip().startswith("{"):
            detail = describe_json_error(json_error)
            raise DamagedTrace(f"{path}: not valid JSON ({detail}); not a trace file", json_error)
        raise DamagedTrace(f"{path}: no valid header (the file must start with "
                           "'{\"schemaVersion\": 1, ... \"traceEvents\": ['); it was cut off "
                           "before the header was complete or is not an fqntrace trace, "
                           "nothing to recover", json_error)
    header, _, _ = _split_chrome(header)
    events = []
    lines = []
    pos = match.end()
    line = line_of(text, pos)
    counted = pos
    keep_end = pos
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return Trace(path, CHROME, header, events, None, cut=True, keep_end=keep_end,
                         event_lines=lines)
        ch = text[pos]
        if ch == "," and events:
            pos += 1
            continue
        if ch == "]":
            return _chrome_after_events(path, text, header, events, lines, pos, keep_end,
                                        json_error)
        try:
            event, end = _DECODER.raw_decode(text, pos)
        except ValueError as error:
            if _only_whitespace_lines_follow(text, pos):
                return Trace(path, CHROME, header, events, None, cut=True, dropped_partial=True,
                             keep_end=keep_end, event_lines=lines)
            raise DamagedTrace(f"{path}: line {line_of(text, pos)} is not valid JSON "
                               f"({error.msg}) and more lines follow: the file is damaged, not "
                               "just cut off; repair only completes cut-off traces",
                               json_error) from None
        line += text.count("\n", counted, pos)
        counted = pos
        events.append(event)
        lines.append(line)
        pos = keep_end = end


def _chrome_after_events(path, text, header, events, lines, pos, keep_end, json_error):
    """pos is at the ']' closing traceEvents. A valid tail here would have made the whole file
    valid JSON, so the tail is either cut off (last line) or damaged."""
    if _only_whitespace_lines_follow(text, pos):
        return Trace(path, CHROME, header, events, None, cut=True, dropped_partial=True,
                     keep_end=keep_end, event_lines=lines)
    detail = f" ({describe_json_error(json_error)})" if json_error is not None else ""
    raise DamagedTrace(f"{path}: the text after traceEvents (line {line_of(text, pos)}) is not a "
                       f"valid tail{detail} and more lines follow: the file is damaged; "
                       "repair only completes cut-off traces", json_error)


def first_json_error(text):
    """The error json.loads raises for text (where the JSON first breaks), or None."""
    try:
        json.loads(text)
    except ValueError as error:
        return error
    return None


def standard_chrome_lines(text, n_events):
    """Line numbers of a Chrome trace's events when the file has the core's one-event-per-line
    layout (for messages), else None."""
    match = TRACE_EVENTS_KEY.search(text)
    if match is None:
        return None
    first = line_of(text, match.end()) + 1
    if text.rstrip().count("\n") != first - 1 + n_events:
        return None
    return list(range(first, first + n_events))


# ---------------------------------------------------------------------------------------------
# JSON Lines


def parse_jsonl(path, text):
    header = None
    events = []
    lines = []
    footer = None
    keep_end = 0
    dropped_partial = False
    pos = 0
    last_start = 0
    n = len(text)
    while pos < n:
        newline = text.find("\n", pos)
        end = n if newline < 0 else newline
        line = text[pos:end]
        line_start = pos
        pos = end + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as error:
            if newline < 0:  # the last line, not newline-terminated: cut off mid-line
                if header is None:
                    raise TraceError(f"{path}: no valid header (the first line is cut off); "
                                     "nothing to recover") from None
                dropped_partial = True
                break
            if header is None:
                raise TraceError(f"{path}: no valid header (line {line_of(text, line_start)} "
                                 f"is not JSON: {error.msg}); not an fqntrace .jsonl trace"
                                 ) from None
            raise TraceError(f"{path}: line {line_of(text, line_start)} is not valid JSON "
                             f"({error.msg}) and more lines follow: the file is damaged, not just "
                             "cut off; repair only completes cut-off traces") from None
        if header is None:
            if not isinstance(obj, dict) or obj.get("ph") != "header":
                raise TraceError(f"{path}: no valid header (the first line must be "
                                 '{"ph": "header", "schemaVersion": 1, ...}); '
                                 "not an fqntrace .jsonl trace")
            header = {k: v for k, v in obj.items() if k != "ph"}
            keep_end = end
            continue
        if footer is not None:
            raise TraceError(f"{path}: line {line_of(text, line_start)} follows the footer line: "
                             "two traces were written into one file; keep one")
        if isinstance(obj, dict) and obj.get("ph") == "footer":
            footer = {k: v for k, v in obj.items() if k != "ph"}
            continue
        events.append(obj)
        if lines:
            lines.append(lines[-1] + text.count("\n", last_start, line_start))
        else:
            lines.append(line_of(text, line_start))
        last_start = line_start
        keep_end = end
    if header is None:
        raise TraceError(f"{path}: no valid header; not an fqntrace .jsonl trace")
    return Trace(path, JSONL, header, events, footer, cut=footer is None,
                 dropped_partial=dropped_partial, keep_end=keep_end, event_lines=lines)


# ---------------------------------------------------------------------------------------------
# Repair


def repaired_text(trace, text):
    """The text of a cut-off trace, closed: every complete event kept byte for byte, the partial
    last line dropped, and a tail saying it was repaired."""
    kept = text[:trace.keep_end]
    n_slices = len(trace.slices())
    if trace.format == JSONL:
        footer = {"ph": "footer", "events": n_slices, "complete": False, "repaired": True,
                  "dropped_lines": 1 if trace.dropped_partial else 0}
        return kept.rstrip("\n") + "\n" + json.dumps(footer) + "\n"
    tail = {"events": n_slices, "complete": False, "repaired": True,
            "dropped_lines": 1 if trace.dropped_partial else 0}
    return kept.rstrip() + "\n], \"fqntrace\": " + json.dumps(tail) + "}\n"
