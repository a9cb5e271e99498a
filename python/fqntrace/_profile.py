"""fqntrace.profile(): trace the body of a with-block (for code that prefers it to FQNTRACE)."""
import contextlib

from fqntrace import _coexist, _distributed, _exit, _fsdp, _hooks, _kineto_hook, _native, _steps


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
    bad path or steps and RuntimeError if a session is already running (e.g. FQNTRACE is set)."""
    C = _native.load()
    expanded = C.start(str(path), _steps_text(steps), memory)
    _exit.finish_before_teardown()  # a body that never ends (os._exit, abort) still leaves a file
    _hooks.install()
    _distributed.watch_process_group()
    _fsdp.install()
    _steps.install()
    _coexist.install()
    _kineto_hook.install()
    try:
        yield expanded
    finally:
        if not C.stop():
            raise RuntimeError(f"fqntrace: the trace {expanded} could not be written completely")
