"""FSDP2 attribution: its collectives belong to the module they serve.

FSDP2 (``fully_shard``) all-gathers a module's parameters and reduce-scatters its gradients from
places that are not that module's forward: the backward all-gather for block i is issued from the
pre-backward hook of the unit that ran after it (prefetch), and the root's reduce-scatter from the
engine's final callback, outside every node. The module each one serves is the one that owns the
``FSDPParamGroup`` doing it, so the group's entry points run inside a *serve* scope for that module
(``_C.serve_enter``): what runs inside takes the module's fqn and keeps its phase.

FSDP's module is imported only by programs that use it (it takes a second to import), so the
methods are wrapped when it is first imported, through a finder on ``sys.meta_path``.
"""
import functools
import importlib.abc
import importlib.util
import sys

from fqntrace import _hooks, _native

TARGET = "torch.distributed.fsdp._fully_shard._fsdp_param_group"
# The group's methods that communicate, or finish communication, for the group's own module.
SERVED_METHODS = ("pre_backward", "unshard", "wait_for_unshard", "post_backward")

_finder = None


def _served_fqn_id(group):
    modules = getattr(group, "modules", None) or ()
    if not modules:
        return None
    # fully_shard([a, b]) groups several modules: the first one stands for the group.
    info = _hooks._names.get(modules[0])
    return None if info is None else info[1]


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
    group_class = getattr(module, "FSDPParamGroup", None)
    if group_class is None:
        return
    for name in SERVED_METHODS:
        method = group_class.__dict__.get(name)
        if callable(method) and not getattr(method, "_fqntrace_serving", False):
            setattr(group_class, name, _serving(method))


class _WrapOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds nothing itself: for TARGET it lets the other finders find the module, then wraps the
    loader so the group's methods are wrapped right after the module body has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)  # let the real finders find it (and never look again)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            _wrap(module)
        except Exception:  # never break the program's import over attribution
            pass


def install():
    """Wraps FSDP2's group methods now if FSDP is loaded, or when it is first imported."""
    global _finder
    module = sys.modules.get(TARGET)
    if module is not None:
        _wrap(module)
        return
    if _finder is None:
        _finder = _WrapOnImport()
        sys.meta_path.insert(0, _finder)
