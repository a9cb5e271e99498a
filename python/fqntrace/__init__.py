"""fqntrace: which layer is slow, forward *and* backward?

Quick start::

    FQNTRACE=trace.json python train.py          # no code change
    python -m fqntrace summary trace.json        # per-module table

or in code::

    import fqntrace
    with fqntrace.profile("trace.json") as run:
        loss = model(x).sum(); loss.backward()
    run.summary()                                # a DataFrame: per module and phase

Results of any trace: ``fqntrace.load("trace.json").summary()`` (also ``.steps()``,
``.diff(other)``, ``.report()``). In Jupyter: ``%load_ext fqntrace``, then ``%%fqntrace`` on a cell.

Steps: every torch.optim optimizer step ends a step (``ProfilerStep#N``); a loop without one calls
``fqntrace.step()``. ``FQNTRACE_STEPS=10:20`` records steps 10 to 19 only.

This module stays light (no torch import) so that `python -m fqntrace` and the start-up hook cost
nothing; the native library is loaded on first use.
"""

import os as _os

__version__ = "0.1.0"
__all__ = [
    "library_path",
    "profile",
    "load",
    "Trace",
    "TraceError",
    "ModTracker",
    "ModuleTracker",
    "flush",
    "tracing",
    "step",
    "capture",
]

_PACKAGE_DIR = _os.path.dirname(_os.path.abspath(__file__))


def library_path() -> str:
    """Path of libfqntrace.so, for torch.ops.load_library() or a C++ program."""
    return _os.path.join(_PACKAGE_DIR, "libfqntrace.so")


def __getattr__(name):
    # Lazy: these need torch and the native library.
    if name == "profile":
        from fqntrace._profile import profile

        return profile
    if name in ("load", "Trace"):  # the analysis half: no torch
        from fqntrace.analysis import results

        return getattr(results, name)
    if name == "TraceError":
        from fqntrace.analysis.errors import TraceError

        return TraceError
    if name in ("ModTracker", "ModuleTracker"):
        from fqntrace import mod_tracker

        return getattr(mod_tracker, name)
    if name in ("step", "current_step", "capture"):
        from fqntrace import _steps

        return getattr(_steps, name)
    if name in ("flush", "tracing"):
        from fqntrace import _native

        return getattr(_native, name)
    raise AttributeError(f"module 'fqntrace' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """`%load_ext fqntrace` in IPython / Jupyter: the %%fqntrace cell magic (fqntrace.notebook)."""
    from fqntrace import notebook

    notebook.load_ipython_extension(ipython)
