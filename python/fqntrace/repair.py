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
    if not trace.cut:
        extra = f" (nothing written to {output})" if output else ""
        return f"already complete: {len(trace.events)} events{extra}"
    target = output or path
    traceio.write_atomic(target, traceio.repaired_text(trace, text), like=path)
    dropped = "dropped 1 partial line" if trace.dropped_partial else "no partial line"
    wrote = f"; wrote {target}" if output else ""
    return f"repaired: kept {len(trace.events)} events ({dropped}){wrote}"
