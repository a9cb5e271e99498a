"""torch.profiler beside FQNTRACE_MEMORY (docs/memory.md). While a traced range is open on a
thread, fqntrace's reporter sits in the allocator's reporting slot, and torch refuses to start a
profiler on a thread whose slot is taken ("Profiler is already enabled on this thread"). So the
functions torch's profilers call to start are wrapped (Kineto's in torch.autograd.profiler, the
legacy one in torch.autograd.profiler_legacy): fqntrace gives the slot back on that thread
first, then torch starts as usual."""

import sys

from fqntrace import _native

_STARTERS = (
    ("torch.autograd.profiler", "_enable_profiler"),
    ("torch.autograd.profiler_legacy", "_enable_profiler_legacy"),
)


def install():
    """Wraps the profilers' start functions once (in the modules torch has imported)."""
    C = _native.load()
    for module_name, name in _STARTERS:
        module = sys.modules.get(module_name)
        if module is not None:
            # The slot given back, then torch's function: no frame of ours on the stack that
            # torch.profiler's Python tracer (with_stack=True) records when it starts.
            _native.wrap_around(module, name, C.memory_yield_slot, None, "coexist")
