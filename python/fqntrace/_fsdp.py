"""FSDP2 attribution: its collectives belong to the module they serve.

FSDP2 (``fully_shard``) all-gathers a module's parameters and reduce-scatters its gradients from
places that are not that module's forward: the backward all-gather for block i is issued from the
pre-backward hook of the unit that ran after it (prefetch), and the root's reduce-scatter from the
engine's final callback, outside every node. The module each one serves is the one that owns the
``FSDPParamGroup`` doing it, so the group's entry points run inside a *serve* scope for that module
(``_C.serve_enter``): what runs inside takes the module's fqn and keeps its phase.

FSDP's module is imported only by programs that use it (it takes a second to import), so the
methods are wrapped when it is first imported (fqntrace._on_import).
"""

import functools
import sys

from fqntrace import _hooks, _native
from fqntrace._on_import import when_imported

TARGET = "torch.distributed.fsdp._fully_shard._fsdp_param_group"
# The group's methods that communicate, or finish communication, for the group's own module.
SERVED_METHODS = ("pre_backward", "unshard", "wait_for_unshard", "post_backward")

_installed = False


def _served_fqn_id(group):
    modules = getattr(group, "modules", None) or ()
    if not modules:
        return None
    # fully_shard([a, b]) groups several modules: the first one stands for the group.
    return _hooks.known_fqn_id(modules[0])


def _serving(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        import torch

        fqn_id = None if torch.compiler.is_compiling() else _served_fqn_id(self)
        if fqn_id is None:
            return method(self, *args, **kwargs)
        C = _native._C
        C.serve_enter(fqn_id)
        try:
            return method(self, *args, **kwargs)
        finally:
            C.serve_exit()

    wrapper._fqntrace_serving = True
    return wrapper


def _wrap(module):
    try:
        group_class = getattr(module, "FSDPParamGroup", None)
        missing = [
            name
            for name in SERVED_METHODS
            if not callable(getattr(group_class, "__dict__", {}).get(name))
        ]
        if missing:  # a torch whose FSDP2 differs: the rest of tracing is unaffected
            state = "off" if len(missing) == len(SERVED_METHODS) else "partly off"
            sys.stderr.write(
                f"fqntrace: FSDP2 collectives' module names: {state} (this torch's "
                f"FSDPParamGroup has no {', '.join(missing)}); those keep the fqn "
                "of the code that issues them\n"
            )
        for name in SERVED_METHODS:
            method = None if name in missing else group_class.__dict__[name]
            if method is not None and not getattr(method, "_fqntrace_serving", False):
                setattr(group_class, name, _serving(method))
    except Exception:  # never break the program (or its import of FSDP) over attribution
        pass


def install():
    """Wraps FSDP2's group methods now if FSDP is loaded, or when it is first imported."""
    global _installed
    if not _installed:
        _installed = True
        when_imported(TARGET, _wrap)
