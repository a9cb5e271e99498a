"""nn.Module record scopes: global forward hooks open and close each module's range in the C++
core, named the way ModTracker names modules.

Naming (ModTracker's rule): a module first seen without a name is a root and is named by its
class; when a module is first seen, each child is named ``<parent>.<attribute>`` and the walk goes
down the tree. A module reachable under two parents is renamed on each walk, so it ends up with the
name of the last path walked; its own children keep the names of the first walk (this is what
torch's ModTracker does, and agreeing with it matters more than tidiness).

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


def _register(C, module, fqn):
    info = (fqn, C.intern(fqn), C.intern(type(module).__name__))
    _names[module] = info
    return info


def name_of(module):
    """(fqn, fqn_id, type_id) of `module`, naming it and its subtree on first sight."""
    C = _native.load()
    info = _names.get(module)
    is_root = info is None
    if is_root:
        info = _register(C, module, type(module).__name__)
    if module not in _walked:
        for child_name, child in module.named_children():
            _register(C, child, f"{info[0]}.{child_name}")
            name_of(child)
        _walked.add(module)
    if is_root:
        _hook_parameters(C, module, info[0])
    return info


def known_fqn(module):
    info = _names.get(module)
    return None if info is None else info[0]


def _announce_owner(fqn_id, _grad):
    _native._C.accumulate_owner(fqn_id)


def _hook_parameters(C, root, root_fqn):
    global _param_owner
    if _param_owner is None:
        from torch.utils.weak import WeakTensorKeyDictionary

        _param_owner = WeakTensorKeyDictionary()
    for sub_name, sub in root.named_modules():
        fqn = f"{root_fqn}.{sub_name}" if sub_name else root_fqn
        for param in sub.parameters(recurse=False):
            if not param.requires_grad or param in _param_owner:
                continue
            _param_owner[param] = fqn
            param.register_hook(functools.partial(_announce_owner, C.intern(fqn)))


# The dict and set behind _names and _walked, read directly with a weak reference to the module
# (weak references hash and compare as their referent): the hook runs on every module call, and
# this spares two Python-level method calls.
_names_data = _names.data
_walked_data = _walked.data
_ref = weakref.ref


def _pre_hook(module, args):
    key = _ref(module)
    info = _names_data.get(key)
    if info is None or key not in _walked_data:
        info = name_of(module)
    _enter(info[1], info[2])


_enter = None


def install():
    """Installs the global forward hooks once per process (idempotent)."""
    global _installed, _enter
    if _installed:
        return
    C = _native.load()
    _enter = C.module_enter
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    _handles.append(register_module_forward_pre_hook(_pre_hook))
    # The exit hook is the C function itself: no Python frame on the way out of each module.
    _handles.append(register_module_forward_hook(C.module_exit, always_call=True))
    _installed = True


def uninstall():
    """Removes the global forward hooks (parameter hooks stay: they only announce owners); the
    next install() puts them back. For measurements that alternate traced and untraced code."""
    global _installed
    for handle in _handles:
        handle.remove()
    _handles.clear()
    _installed = False


# Read-only views of the naming tables, for fqntrace.mod_tracker, fqntrace._fsdp and the benchmarks
# (the tables themselves stay private to this module).


def installed():
    """True while the global forward hooks are installed."""
    return _installed


def known_fqn_id(module):
    """The interned id of `module`'s fqn if it has been named, else None."""
    info = _names.get(module)
    return None if info is None else info[1]


def naming(module):
    """`module`'s naming record, naming it and its subtree first if needed (as the pre-hook
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
