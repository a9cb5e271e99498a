"""`python -m fqntrace repair`: closes a trace cut off by a crash.

Every complete event is kept byte for byte, a partial last line is dropped, and a tail marked
``complete: false, repaired: true`` closes the file (traceio.repaired_text). A complete file is
left untouched.
"""
from fqntrace import traceio


def repair_file(path, output=None):
    """Repairs `path` in place, or into `output`; returns the line that says what was done."""
    text = traceio.read_text(path)
    trace = traceio.parse(path, text)
    _check_is_ours(path, trace.header)
    if not trace.cut:
        extra = f" (nothing written to {output})" if output else ""
        return f"already complete: {len(trace.events)} events{extra}"
    target = output or path
    traceio.write_atomic(target, traceio.repaired_text(trace, text), like=path)
    dropped = "dropped 1 partial line" if trace.dropped_partial else "no partial line"
    wrote = f"; wrote {target}" if output else ""
    return f"repaired: kept {len(trace.events)} events ({dropped}){wrote}"


def _check_is_ours(path, header):
    """Only a file the core began (its header is there) is closed: completing anything else
    would write a file that is still not a trace."""
    info = header.get("distributedInfo") if isinstance(header, dict) else None
    if (not isinstance(header, dict) or header.get("schemaVersion") != 1
            or not isinstance(info, dict) or not isinstance(info.get("rank"), int)
            or not isinstance(info.get("world_size"), int)
            or not isinstance(header.get("baseTimeNanoseconds"), int)):
        raise traceio.TraceError(f"{path}: not an fqntrace trace (its header lacks schemaVersion 1, "
                                 "distributedInfo or baseTimeNanoseconds); nothing repaired")
