"""fqntrace.profile(): trace the body of a with-block (for code that prefers it to FQNTRACE)."""
import contextlib

from fqntrace import _distributed, _exit, _fsdp, _hooks, _native


@contextlib.contextmanager
def profile(path):
    """Traces everything the body runs to `path` (.json: Chrome trace, .jsonl: JSON Lines;
    {pid} and {rank} are expanded). Yields the expanded path. Raises ValueError for a bad path
    and RuntimeError if a session is already running (e.g. FQNTRACE is set)."""
    C = _native.load()
    expanded = C.start(str(path))
    _exit.finish_before_teardown()  # a body that never ends (os._exit, abort) still leaves a file
    _hooks.install()
    _distributed.watch_process_group()
    _fsdp.install()
    try:
        yield expanded
    finally:
        if not C.stop():
            raise RuntimeError(f"fqntrace: the trace {expanded} could not be written completely")
