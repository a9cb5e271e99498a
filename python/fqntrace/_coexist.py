"""torch.profiler beside FQNTRACE_MEMORY (docs/memory.md). While a traced range is open on a
thread, fqntrace's reporter sits in the allocator's reporting slot, and torch refuses to start a
profiler on a thread whose slot is taken ("Profiler is already enabled on this thread"). So the
function torch.autograd.profiler calls to start one is wrapped: fqntrace gives the slot back on
that thread first, then torch starts as usual."""
import sys

from fqntrace import _native


def install():
    """Wraps torch.autograd.profiler._enable_profiler once (torch must be imported)."""
    module = sys.modules.get("torch.autograd.profiler")
    if module is None:
        return
    original = getattr(module, "_enable_profiler", None)
    if original is None or getattr(original, "_fqntrace_wrapped", False):
        return
    C = _native.load()

    def _enable_profiler(*args, **kwargs):
        try:
            C.memory_yield_slot()
        except Exception:  # never stand in torch.profiler's way
            pass
        return original(*args, **kwargs)

    _enable_profiler._fqntrace_wrapped = True
    _enable_profiler.__wrapped__ = original
    module._enable_profiler = _enable_profiler
