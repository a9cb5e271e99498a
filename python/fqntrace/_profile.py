"""fqntrace.profile(): trace the body of a with-block (for code that prefers it to FQNTRACE)."""
import contextlib
import sys

from fqntrace import _features, _native


def _steps_text(steps):
    """FQNTRACE_STEPS syntax from a `steps` argument: "A:B[:P]", range(A, B) or (A, B[, P])."""
    if steps is None or isinstance(steps, str):
        return steps
    if isinstance(steps, range):
        if steps.step != 1:
            raise ValueError(f"fqntrace: steps={steps!r}: a range of consecutive steps, "
                             "e.g. range(10, 20); for a period use \"10:20:100\"")
        return f"{steps.start}:{steps.stop}"
    if isinstance(steps, (tuple, list)) and len(steps) in (2, 3):
        return ":".join(str(v) for v in steps)
    raise ValueError(f"fqntrace: steps={steps!r}: expected \"FIRST:END[:PERIOD]\", "
                     "range(FIRST, END) or (FIRST, END[, PERIOD])")


@contextlib.contextmanager
def profile(path, steps=None, memory=None):
    """Traces everything the body runs to `path` (.json: Chrome trace, .jsonl: JSON Lines, .gz
    after either: gzip; {pid} and {rank} are expanded). Yields the expanded path.
    `steps`: only these training steps are recorded ("10:20", range(10, 20), "10:20:100"; the
    FQNTRACE_STEPS syntax, docs/trace-format.md); a step ends at every optimizer step or
    fqntrace.step(). `memory=True` records the allocator's reports per module
    (FQNTRACE_MEMORY, docs/memory.md); None: as FQNTRACE_MEMORY says. Raises ValueError for a
    bad path or steps and RuntimeError if a session is already running (e.g. FQNTRACE is set).
    When the tracer cannot be loaded here (built for another torch, or missing), the body runs
    untraced, the block yields None, and one line on stderr says what rebuilds it."""
    try:
        C = _native.load()
    except _native.NotLoadable as error:
        sys.stderr.write(f"fqntrace: profile() runs its body untraced: {error.reason}\n")
        yield None
        return
    expanded = C.start(str(path), _steps_text(steps), memory)
    # First of the parts: a body that never ends (os._exit, abort) still leaves a file.
    _features.install_all()
    try:
        yield expanded
    finally:
        if not C.stop():
            raise RuntimeError(f"fqntrace: the trace {expanded} could not be written completely")
