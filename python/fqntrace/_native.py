"""Loads libfqntrace.so and its Python binding exactly once."""
import os
import sys

_C = None


def load():
    """Returns the native binding module, loading the library on first call."""
    global _C
    if _C is not None:
        return _C
    import torch

    from fqntrace import library_path

    path = library_path()
    try:
        torch.ops.load_library(path)
        from fqntrace import _C as binding
    except (OSError, ImportError) as error:
        raise ImportError(
            f"fqntrace: could not load its native library {path} ({error}). Likely causes: the "
            f"package was built against another torch than the one imported here "
            f"(torch {torch.__version__}, needs 2.13.0), or the build is missing (run "
            f"scripts/setup.sh from the fqntrace repository)."
        ) from error
    _C = binding
    return _C


def tracing() -> bool:
    """True while a session writes a trace."""
    return load().running()


def flush() -> None:
    """Writes every event recorded so far to the file now."""
    load().flush()
