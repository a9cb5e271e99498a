"""The format rules every reader of trace files shares (tracestream, follower, whole_file, the
verbs): the two formats (CHROME, JSONL) and which a file's name says, a gzip name, a header's
fields, and parsing a Chrome trace's header and tail; the JSON Lines footer's mark.
"""

import json
import re

CHROME = "chrome"
JSONL = "jsonl"
FOOTER_MARK = b'"footer"'  # in a JSON Lines footer line
_TAIL_PREFIX = re.compile(r"\]\s*")
_EMPTY_TAIL = '{"traceEvents": []'


def is_gzip(path):
    """Is `path` named as a gzip file (it is written gzip-compressed; a file is read as gzip by
    its first bytes)?"""
    return str(path).lower().endswith(".gz")


def base_name(path):
    """The path without a trailing .gz: what the format is detected from."""
    text = str(path)
    return text[:-3] if is_gzip(text) else text


def format_by_name(path):
    """CHROME or JSONL as the file's name says (a .gz suffix aside), None when it says neither."""
    name = base_name(path).lower()
    return JSONL if name.endswith(".jsonl") else CHROME if name.endswith(".json") else None


def header_fields(obj, fmt):
    """A header object's fields: a Chrome trace's top level without traceEvents and the fqntrace
    tail, a JSON Lines header line without its "ph"."""
    left_out = ("ph",) if fmt == JSONL else ("traceEvents", "fqntrace")
    return {k: v for k, v in obj.items() if k not in left_out}


def parse_chrome_header(text):
    """The header fields of a Chrome trace's text up to and including ``"traceEvents": [``, or
    None when that is not the start of a JSON object."""
    try:
        obj = json.loads(text + "]}")
    except ValueError:
        return None
    return header_fields(obj, CHROME) if isinstance(obj, dict) else None


def parse_chrome_tail(rest):
    """(the fqntrace tail, the other top-level fields after traceEvents) of a Chrome trace's text
    from the ']' closing traceEvents on, a missing ',' after it supplied; ValueError when it is
    no valid tail."""
    after = _TAIL_PREFIX.match(rest).end()
    obj = json.loads(
        _EMPTY_TAIL + (", " if rest[after : after + 1] not in (",", "}") else "") + rest[after:]
    )
    tail = obj.get("fqntrace")
    return (tail if isinstance(tail, dict) else {}), header_fields(obj, CHROME)
