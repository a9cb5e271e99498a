"""nn.Module record scopes: fqntrace's nn.Module.__call__ opens and closes each module's range in
the C++ core, named the way ModTracker names modules.

Naming (ModTracker's rule): a module first seen without a name is a root and is named by its
class; when a module is first seen, each child is named ``<parent>.<attribute>`` and the walk goes
down the tree. A module reachable under two parents is renamed on each walk, so it ends up with the
name of the last path walked; its own children keep the names of the first walk (this is what
torch's ModTracker does, and agreeing with it matters more than tidiness).

Compiled modules: `torch.compile(m)` wraps `m` in an OptimizedModule whose child `_orig_mod` is
`m`; both take the name the user knows `m` by (`Net.blocks.1`, as in the state_dict without
`_orig_mod`), and its submodules are named below it (docs/compile.md).

Gradient accumulation: when a root is first named, each trainable parameter gets a tensor hook
that tells the core which module owns it (the first owner in ``named_modules()`` order when weights
are tied), so the AccumulateGrad node and the ops under it carry that module's fqn.
"""
import functools
import weakref

from fqntrace import _native

_installed = False
_handles = []
_names = weakref.WeakKeyDictionary()   # module -> (fqn, fqn_id, type_id)
_walked = weakref.WeakSet()            # modules whose children have been named
_param_owner = None  # parameter -> fqn (a WeakTensorKeyDictionary: tensors compare elementwise)


def _compiled_inner(module):
    """The module a torch.compile wrapper (OptimizedModule) runs, or None for other modules."""
    if type(module).__name__ != "OptimizedModule":
        return None
    return module._modules.get("_orig_mod")


def _register(C, module, fqn):
    shown = _compiled_inner(module) or module
    info = (fqn, C.intern(fqn), C.intern(type(shown).__name__))
    if _names.get(module) != info:
        _names[module] = info
        C.names_changed()  # the C side caches names by module (module_scope_methods.cpp)
    return info


def name_of(module):
    """(fqn, fqn_id, type_id) of `module`, naming it and its subtree on first sight."""
    C = _native.load()
    info = _names.get(module)
    is_root = info is None
    if is_root:
        inner = _compiled_inner(module)
        inner_info = _names.get(inner) if inner is not None else None
        # A module compiled after it was named keeps its name; else roots take their class name.
        root_name = inner_info[0] if inner_info is not None else type(inner or module).__name__
        info = _register(C, module, root_name)
    if module not in _walked:
        compiled = _compiled_inner(module) is not None
        for child_name, child in module.named_children():
            child_fqn = info[0] if compiled and child_name == "_orig_mod" else f"{info[0]}.{child_name}"
            _register(C, child, child_fqn)
            name_of(child)
        _walked.add(module)
    if is_root:
        _hook_parameters(C, module, info[0])
    return info


def known_fqn(module):
    info = _names.get(module)
    return None if info is None else info[0]


def _hook_parameters(C, root, root_fqn):
    global _param_owner
    if _param_owner is None:
        from torch.utils.weak import WeakTensorKeyDictionary

        _param_owner = WeakTensorKeyDictionary()
    for sub_name, sub in root.named_modules():
        path = [part for part in sub_name.split(".") if part and part != "_orig_mod"]
        fqn = ".".join([root_fqn] + path)
        for param in sub.parameters(recurse=False):
            if not param.requires_grad or param in _param_owner:
                continue
            _param_owner[param] = fqn
            # A C function through partial: no Python frame per gradient.
            param.register_hook(functools.partial(C.accumulate_owner_hook, C.intern(fqn)))


_torch_call = None  # nn.Module.__call__ as torch defined it, while ours is in its place


def _module_call_method(module_call):
    # Named as torch names the function it replaces: torch.compile(module) adds a frame of its own
    # around a module's __call__ unless its name is one of torch's module call functions, and that
    # frame would cost a graph break wherever the module's forward breaks the graph.
    def _wrapped_call_impl(self, *args, **kwargs):
        return module_call(self, *args, **kwargs)

    return _wrapped_call_impl


def install():
    """Puts fqntrace's module call in nn.Module.__call__'s place once per process (idempotent).

    fqntrace's __call__ hands the call to `_C.module_call`, which opens the module's scope, runs
    torch's own __call__ and closes the scope, also when forward raises. It is a plain Python
    function so that it binds like torch's and survives code that saves and restores
    nn.Module.__call__ (torch.fx); _compile.py keeps Dynamo from seeing it as a frame of its own
    and has it inline torch's __call__ in its place. No global forward hooks: they would put every
    module call on the slow path of torch's _call_impl, which costs more than the scope itself
    (docs/benchmarks.md). The C side reads the dict and set behind _names and _walked directly
    (a weak reference to the module as key; a cache by address in front), and calls name_of()
    only for a module not yet named."""
    global _installed, _torch_call
    if _installed:
        return
    C = _native.load()
    import torch

    from fqntrace import _compile

    C.set_module_names(_names.data, _walked.data, name_of)
    _torch_call = torch.nn.Module.__call__
    C.set_module_call(_torch_call)
    ours = _module_call_method(C.module_call)
    _compile.install(_torch_call, ours)
    torch.nn.Module.__call__ = ours
    _installed = True


def uninstall():
    """Gives nn.Module.__call__ back to torch (parameter hooks stay: they only announce owners);
    the next install() puts fqntrace's back. For measurements that alternate traced and untraced
    code."""
    global _installed
    if not _installed:
        return
    import torch

    if torch.nn.Module.__dict__.get("__call__") is not _torch_call:
        torch.nn.Module.__call__ = _torch_call
    _installed = False


# Read-only views of the naming tables, for fqntrace.mod_tracker, fqntrace._fsdp and the benchmarks
# (the tables themselves stay private to this module).


def installed():
    """True while fqntrace's nn.Module.__call__ is installed."""
    return _installed


def known_fqn_id(module):
    """The interned id of `module`'s fqn if it has been named, else None."""
    info = _names.get(module)
    return None if info is None else info[1]


# The dict and set behind _names and _walked, read directly with a weak reference to the module
# (weak references hash and compare as their referent), as _C.module_call does.
_names_data = _names.data
_walked_data = _walked.data
_ref = weakref.ref


def naming(module):
    """`module`'s naming record, naming it and its subtree first if needed (as _C.module_call
    does). Opaque: a rename replaces it, so `is` tells whether a name changed since it was last
    seen. Reads the tables behind the weak containers directly: this runs on every module call."""
    key = _ref(module)
    info = _names_data.get(key)
    if info is None or key not in _walked_data:
        info = name_of(module)
    return info


def named_modules():
    """(module, fqn) of every live module that has been named."""
    return [(module, info[0]) for module, info in list(_names.items())]
