"""nn.Module record scopes: fqntrace's nn.Module.__call__ opens and closes each module's scope in
the C++ core, named the way ModTracker names modules.

Naming (ModTracker's rule, as a fresh tracker would name the model as it is now): a module first
seen without a name is a root and is named by its class; a root's first call walks the tree below
it and names each child ``<parent>.<attribute>``. Within one walk a module reachable under two
parents is renamed on each path, so it ends up with the name of the last path walked, and its own
children keep the names of the first path (torch's ModTracker does this; agreeing with it matters
more than tidiness). A module registered later under a named parent (attribute assignment,
``add_module``, ``ModuleList.append``, parametrizations, PEFT's injected layers) is named under
it at once, with its subtree, through torch's global module-registration hook; a module that
becomes part of a new root's tree (a model wrapped after a first call) is renamed by that root's
walk. Events already written keep the names they had.

Compiled modules: `torch.compile(m)` wraps `m` in an OptimizedModule whose child `_orig_mod` is
`m`; both take the name the user knows `m` by (`Net.blocks.1`, as in the state_dict without
`_orig_mod`), and its submodules are named below it (docs/compile.md).

Gradient accumulation: each trainable parameter's owner (the first owner in ``named_modules()``
order when weights are tied) is recorded in the core, keyed by the parameter object; the core
finds it from the AccumulateGrad node the autograd engine runs. Nothing is attached to a
parameter (no hook, no weak reference), so swap_tensors, lazy parameters, pickling and copies
behave as without fqntrace.
"""

import weakref

from fqntrace import _native

_installed = False
_registration_hooks = []  # torch's handles of our module- and parameter-registration hooks
# module -> (fqn, fqn_id, type_id, class, parent_id): the class the entry was made for (a module
# whose class changes — a lazy module's cls_to_become, parametrize — is named again on its next
# call) and its parent's fqn id (0 for a root), for the trace's module table.
_names = weakref.WeakKeyDictionary()
_walked = weakref.WeakSet()  # modules whose children have been named


def _compiled_inner(module):
    """The module a torch.compile wrapper (OptimizedModule) runs, or None for other modules."""
    if type(module).__name__ != "OptimizedModule":
        return None
    return module._modules.get("_orig_mod")


def _register(C, module, fqn, parent_id=0):
    shown = _compiled_inner(module) or module
    info = (fqn, C.intern(fqn), C.intern(type(shown).__name__), type(module), parent_id)
    if _names.get(module) != info:
        _names[module] = info
        C.declare_module(info[1], info[2], parent_id)  # the trace's module table
        C.names_changed()  # the C side caches names by module (module_scope_methods.cpp)
    return info


def _child_fqn(parent, parent_fqn, child_name):
    if child_name == "_orig_mod" and _compiled_inner(parent) is not None:
        return parent_fqn
    return f"{parent_fqn}.{child_name}"


def _parent_id(C, parent, parent_fqn, child_fqn):
    """The fqn id the module table gives as a child's parent."""
    if child_fqn != parent_fqn:
        return C.intern(parent_fqn)
    info = _names.get(parent)  # torch.compile's _orig_mod: in the wrapper's place in the tree
    return info[4] if info is not None else 0


def _walk(C, module, fqn):
    """Names the tree below `module` (named `fqn`) as one ModTracker walk does, and records the
    owner of each trainable parameter in it (first owner in walk order, which is named_modules()
    order). Iterative: a model nested deeper than the recursion limit allows is still named."""
    seen = {id(module)}
    claimed = set()
    _walked.add(module)
    _own_parameters(C, module, fqn, claimed)
    stack = [(module, fqn, iter(module.named_children()))]
    while stack:
        parent, parent_fqn, children = stack[-1]
        child_name, child = next(children, (None, None))
        if child is None:
            stack.pop()
            continue
        child_fqn = _child_fqn(parent, parent_fqn, child_name)
        _register(C, child, child_fqn, _parent_id(C, parent, parent_fqn, child_fqn))
        if id(child) in seen:
            continue
        seen.add(id(child))
        _walked.add(child)
        _own_parameters(C, child, child_fqn, claimed)
        stack.append((child, child_fqn, iter(child.named_children())))


def _own_parameters(C, module, fqn, claimed):
    fqn_id = None
    for param in module._parameters.values():
        if param is None or not param.requires_grad or id(param) in claimed:
            continue
        claimed.add(id(param))
        fqn_id = C.intern(fqn) if fqn_id is None else fqn_id
        C.set_param_owner(param, fqn_id)


def name_of(module):
    """`module`'s naming record (fqn, fqn_id, type_id, class, parent_id), naming it and its
    subtree on first sight, and its type again when its class changed."""
    C = _native.load()
    info = _names.get(module)
    if info is not None and info[3] is not type(module):
        info = _register(C, module, info[0], info[4])
    if info is None:
        inner = _compiled_inner(module)
        inner_info = _names.get(inner) if inner is not None else None
        # A module compiled after it was named keeps its name; else roots take their class name.
        root_name = inner_info[0] if inner_info is not None else type(inner or module).__name__
        info = _register(C, module, root_name)
    if module not in _walked:
        _walk(C, module, info[0])
    return info


def _on_module_registered(parent, name, child):
    """torch's global module-registration hook: a module registered under a named parent is
    named under it now, with its subtree. Returns None (the module registered is unchanged)
    and never raises into the program."""
    try:
        info = _names.get(parent)
        if info is not None and child is not None and parent in _walked:
            C = _native.load()
            child_fqn = _child_fqn(parent, info[0], name)
            _register(C, child, child_fqn, _parent_id(C, parent, info[0], child_fqn))
            _walk(C, child, child_fqn)
    except Exception:
        pass
    return None


def _on_parameter_registered(module, name, param):
    """torch's global parameter-registration hook: a new parameter of a named module belongs to
    it (a parameter that already has an owner keeps it: tied weights keep their first owner)."""
    try:
        info = _names.get(module)
        if info is not None and param is not None and param.requires_grad:
            C = _native.load()
            if C.param_owner(param) == 0:
                C.set_param_owner(param, info[1])
    except Exception:
        pass
    return None


def known_fqn(module):
    info = _names.get(module)
    return None if info is None else info[0]


_torch_call = None  # nn.Module.__call__ as torch defined it, while ours is in its place
_our_call = None


def install():
    """Puts fqntrace's module call in nn.Module.__call__'s place once per process (idempotent).

    fqntrace's __call__ is a C object (`_C.module_call(torch's __call__)`): it opens the module's
    scope, runs torch's own __call__ and closes the scope, also when forward raises. Being C and
    called through vectorcall, it adds no frame to tracebacks and nothing to the depth the
    recursion limit counts; it binds like a function, so code that saves and restores
    nn.Module.__call__ (torch.fx) gets it back; _compile.py has Dynamo trace it as torch's own.
    No global forward hooks: they would put every module call on the slow path of torch's
    _call_impl and add a frame of torch's (`inner`) to every traceback. The C side reads the dict
    and set behind _names and _walked directly (a weak reference to the module as key; a cache
    by address in front), and calls name_of() only for a module not yet named."""
    global _installed, _torch_call, _our_call
    if _installed:
        return
    C = _native.load()
    import torch
    from torch.nn.modules import module as torch_module

    from fqntrace import _compile

    C.set_module_names(_names.data, _walked.data, name_of)
    if _torch_call is None:
        _torch_call = torch.nn.Module.__call__
        _our_call = C.module_call(_torch_call)
        # C callables running the hooks unseen by the program's Python profilers (with_stack)
        _registration_hooks.append(
            torch_module.register_module_module_registration_hook(
                C.unprofiled(_on_module_registered)
            )
        )
        _registration_hooks.append(
            torch_module.register_module_parameter_registration_hook(
                C.unprofiled(_on_parameter_registered)
            )
        )
    _compile.install(_torch_call, _our_call, uninstall)
    torch.nn.Module.__call__ = _our_call
    _installed = True


def uninstall():
    """Gives nn.Module.__call__ back to torch (the registration hooks stay: they only name);
    the next install() puts fqntrace's back. For measurements that alternate traced and
    untraced code."""
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
    if info is None or info[3] is not type(module) or key not in _walked_data:
        info = name_of(module)
    return info


def named_modules():
    """(module, fqn) of every live module that has been named."""
    return [(module, info[0]) for module, info in list(_names.items())]
