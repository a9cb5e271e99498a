"""Loads libfqntrace.so and its Python binding exactly once."""

_C = None


class NotLoadable(ImportError):
    """The tracer cannot be loaded here; `reason` is the sentence to show (with what fixes it)."""

    def __init__(self, reason):
        super().__init__(f"fqntrace: {reason}")
        self.reason = reason


def load():
    """Returns the native binding module, loading the library on first call. Raises NotLoadable
    (an ImportError) when the library is missing or built for another torch."""
    global _C
    if _C is not None:
        return _C
    import torch

    from fqntrace import _build, library_path

    mismatch = _build.problem(torch)
    if mismatch is not None:
        raise NotLoadable(mismatch)
    path = library_path()
    try:
        torch.ops.load_library(path)
        from fqntrace import _C as binding
    except (OSError, ImportError) as error:
        raise NotLoadable(
            f"could not load its native library {path} ({error}) under torch "
            f"{torch.__version__}; reinstall it into this environment: {_build.rebuild_command()}"
        ) from error
    _C = binding
    return _C


def loaded():
    """The native binding if it is loaded already, else None (loads nothing)."""
    return _C


def wrapped_by(fn, tag):
    """Whether `fn` is (or wraps) fqntrace's `_C.around` wrapper tagged `tag`."""
    while fn is not None and type(fn).__name__ == "Around":
        if fn._fqntrace_tag == tag:
            return True
        fn = fn.__wrapped__
    return False


def wrap_around(module, name, before, after, tag):
    """module.name becomes _C.around(original, before, after, tag) once (nothing when it is
    missing or already wraps a `tag` wrapper). `before` / `after`: C callables (a builtin of _C, a
    functools.partial or _C.unprofiled of one), run around the function in a C wrapper: no frame
    of fqntrace's for torch.profiler's Python tracer to record, and their errors never reach
    the caller."""
    original = getattr(module, name, None)
    if original is None or wrapped_by(original, tag):
        return
    setattr(module, name, load().around(original, before, after, tag))


def tracing() -> bool:
    """True while a session writes a trace."""
    return load().running()


def flush() -> None:
    """Writes every event recorded so far to the file now."""
    load().flush()
