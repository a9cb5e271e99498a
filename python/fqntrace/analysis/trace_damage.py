"""What is wrong with a file that is no whole trace, told when an error is reported and never
while reading: what a file without a trace header is, where a damaged file's JSON first breaks,
and the line and column of a byte offset. Each reads the file again (through
trace_bytes.ByteSource), so reading the core's lines counts nothing.
"""

import codecs
import json

from fqntrace.analysis.errors import DamagedTrace, NotATrace, describe_json_error
from fqntrace.analysis.trace_bytes import ByteSource, as_text

# What a file with no trace header is, and where a damaged file's JSON first breaks, is told by
# reading it whole: only a file of up to this much text (an error's detail, never the reading).
DESCRIBE_BYTES = 32 << 20


def no_header(path, start, whole):
    """The error for a Chrome file without a trace header, from its first bytes `start` (all of
    them when `whole`): JSON of another kind (NotATrace), or where its JSON breaks."""
    text = as_text(start) if whole else None
    json_error = None
    if text is not None:
        try:
            document = json.loads(text)
        except ValueError as error:
            json_error = describe_json_error(error)
        else:
            if not isinstance(document, dict):
                return NotATrace(
                    f"{path}: not a trace (the JSON is a "
                    f"{type(document).__name__}, not an object with "
                    "traceEvents)",
                    document,
                )
            if not isinstance(document.get("traceEvents"), list):
                return NotATrace(f"{path}: not a trace (no traceEvents list)", document)
    if not start.lstrip().startswith(b"{"):
        detail = f" ({json_error})" if json_error else ""
        return DamagedTrace(f"{path}: not valid JSON{detail}; not a trace file", json_error)
    stripped = text.strip() if text is not None else ""
    return DamagedTrace(
        f"{path}: no valid header (the file must start with "
        "'{\"schemaVersion\": 1, ... \"traceEvents\": ['); it was cut off "
        "before the header was complete or is not an fqntrace trace, nothing "
        "to recover",
        json_error,
        header_cut=stripped.startswith('{"schemaVersion"') and "\n" not in stripped,
    )


def positions(path, *offsets):
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
                rest = data[offset - done :]
                data = data[: offset - done]
                done += len(data)
                newline = data.rfind(b"\n")
                if newline >= 0:
                    line += data.count(b"\n")
                    decoder.reset()  # a newline never splits a character
                    column = 1 + len(decoder.decode(data[newline + 1 :]))
                else:
                    column += len(decoder.decode(data))
            found.append((line, column))
    finally:
        source.close()
    return found


def json_error_at(path, offset, reason):
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
                    json.loads(as_text(b"".join(chunks)))
                except ValueError as error:
                    return describe_json_error(error)
                break
            chunks.append(data)
            size += len(data)
    finally:
        source.close()
    line, column = positions(path, offset)[0]
    return f"{reason}: line {line} column {column}"
