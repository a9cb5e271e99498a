"""torch.profiler's own traces carry fqntrace's fqn and phase (docs/trace-format.md, *torch.profiler
traces*). Runs in the traced process:

* while torch.profiler records (between torch's `_enable_profiler` and `_disable_profiler`, which
  every torch.profiler / torch.autograd.profiler start and stop goes through), fqntrace's
  callback asks RecordFunction for ids, so each range fqntrace records carries the handle Kineto
  writes as "Record function id";
* when the profiler writes its trace (`torch.autograd.profiler.profile.export_chrome_trace`, which
  `torch.profiler.profile.export_chrome_trace`, `tensorboard_trace_handler` and any
  `on_trace_ready` that exports go through; a `.gz` export writes through it first), the file is
  annotated in place from the drain's attribution (fqntrace.analysis.kineto_annotate).

Nothing here may disturb the profiler: a failure is one line on stderr and the file stays as
torch wrote it."""

import functools
import os
import sys

from fqntrace import _native

_PROFILER = "torch.autograd.profiler"


def _log(message):
    sys.stderr.write(f"fqntrace: {message}\n")


def _annotate(path, C):
    from fqntrace.analysis import kineto_annotate

    try:
        attribution = C.record_function_attribution()
        if attribution:
            kineto_annotate.annotate_file(path, attribution)
    except Exception as error:  # the profiler's file stays as torch wrote it
        _log(
            f"could not add fqn/phase to the torch.profiler trace {path} ({error}); it is left "
            "as torch wrote it. `python -m fqntrace annotate` can do it from fqntrace's trace"
        )


def _wrap_export(profile_class, C):
    original = getattr(profile_class, "export_chrome_trace", None)
    if original is None or getattr(original, "_fqntrace_ids", False):
        return

    def export_chrome_trace(self, path, *args, **kwargs):
        result = original(self, path, *args, **kwargs)
        if isinstance(path, (str, os.PathLike)) and C.running():
            _annotate(os.fspath(path), C)
        return result

    export_chrome_trace._fqntrace_ids = True
    export_chrome_trace.__wrapped__ = original
    export_chrome_trace.__doc__ = original.__doc__
    profile_class.export_chrome_trace = export_chrome_trace


def install():
    """Wraps torch.autograd.profiler's start, stop and export once (when torch imported it)."""
    module = sys.modules.get(_PROFILER)
    if module is None:
        return
    C = _native.load()
    ids_on = functools.partial(C.record_function_ids, True)
    ids_off = functools.partial(C.record_function_ids, False)
    _native.wrap_around(module, "_enable_profiler", ids_on, None, "kineto")
    _native.wrap_around(module, "_disable_profiler", None, ids_off, "kineto")
    profile_class = getattr(module, "profile", None)
    if profile_class is not None:
        _wrap_export(profile_class, C)
