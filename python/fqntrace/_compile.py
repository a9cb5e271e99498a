"""torch.compile: tracing never changes the compiled program, and compiled code keeps its
module names (docs/compile.md).

- Dynamo sees fqntrace's nn.Module.__call__ (_hooks.py, a C object with no frame of its own) as
  torch's own __call__ (its short cut to forward, or a polyfill that is torch's __call__), so
  fqntrace adds no graph break, no frame and no guard of its own; inside compiled code module
  scopes are not opened.
- A `Torch-Compiled Region` takes the fqn of the module being called (the C resolver reads the
  caller's `nn.Module._call_impl` frame), so `module.compile()` keeps its name.
- Inductor: while a graph is generated, every kernel and extern call it emits is recorded with the
  module its FX nodes came from (`nn_module_stack`, `fwd_nn_module_stack` in backward graphs);
  when the compiled graph runs, the observer names each op it calls from that list, below the
  fqn of the module the graph runs for. The list is kept beside inductor's cache, so graphs
  loaded from the cache keep their names; traced compiles are cached apart from untraced ones.
Nothing here touches a graph: every patch only records or announces, and any failure inside one
leaves the compiler's own behaviour untouched.
"""

import json
import os
import re
import sys
import threading
import weakref

from fqntrace import _native, _on_import

_capture = threading.local()  # .sites: the calls of the graph being generated, or None
_installed = False


_torch_call = None  # torch's nn.Module.__call__, which Dynamo inlines where fqntrace's runs
_our_call = None  # fqntrace's nn.Module.__call__ (_hooks.py)
_give_call_back = None  # _hooks.uninstall: torch's __call__ back in nn.Module


def install(torch_call, our_call, give_call_back):
    """Sets up compile support once per process; the compiler modules are patched only when
    the program imports them. `torch_call`: torch's nn.Module.__call__; `our_call`: the one
    fqntrace puts in its place (_hooks.install); `give_call_back()` puts torch's back, for when
    Dynamo cannot be shown ours as torch's. (Passed in: _hooks imports this module, not the
    other way round.)"""
    global _installed, _torch_call, _our_call, _give_call_back
    if _installed:
        return
    _installed = True
    _torch_call, _our_call, _give_call_back = torch_call, our_call, give_call_back
    from torch.nn.modules.module import Module

    _native.load().set_region_codes(
        (Module._call_impl.__code__, Module._wrapped_call_impl.__code__)
    )
    for name, set_up in (
        ("torch._dynamo", _hide_hooks_from_dynamo),
        ("torch._inductor.config", _cache_apart),
        ("torch._inductor.debug", _record_kernel_sites),
        ("torch._inductor.codegen.cpp", _record_kernel_sites),
        ("torch._inductor.compile_fx", _capture_graphs),
        ("torch._inductor.output_code", _name_graph_calls),
    ):
        _on_import.when_imported(name, _guarded(name, set_up))


def _guarded(name, set_up):
    """Runs a set-up step after `import name`; a failure is one line and never reaches the
    import the program asked for (the compiler then works as without fqntrace)."""

    def run(module):
        try:
            set_up(module)
        except Exception as error:
            sys.stderr.write(
                f"fqntrace: setting up torch.compile support after `import {name}` "
                f"failed ({error}); compiled code keeps fewer module names.\n"
            )

    return run


# --- Dynamo ----------------------------------------------------------------------------------


def _hide_hooks_from_dynamo(_dynamo):
    try:
        _trace_our_call_as_torchs()
    except Exception as error:
        # Traced by Dynamo, the hooks would break graphs: better no module names than that.
        _give_call_back()
        sys.stderr.write(
            f"fqntrace: could not hide the module hooks from torch.compile ({error}); "
            "module names are off, ops are still traced.\n"
        )


def _trace_our_call_as_torchs():
    """Dynamo meets fqntrace's nn.Module.__call__ (a C object, _hooks.py) where it looks for
    torch's: it takes the short cut to forward it takes untraced when the module call it sees is
    the one torch had at Dynamo's import (ours, imported after fqntrace installed; made so
    otherwise), and elsewhere traces a polyfill that is torch's __call__. Dynamo's
    substitute_in_graph accepts only functions, so its type check is widened to our object for
    the one call that registers it."""
    from torch._dynamo import decorators, utils
    from torch._dynamo.variables import nn_module

    torch_call, our_call = _torch_call, _our_call
    for module in (utils, nn_module):
        if getattr(module, "unpatched_nn_module_call", None) is torch_call:
            module.unpatched_nn_module_call = our_call

    def module_call(module, *args, **kwargs):
        return torch_call(module, *args, **kwargs)

    is_function = decorators.is_function
    decorators.is_function = lambda value: value is our_call or is_function(value)
    try:
        decorators.substitute_in_graph(our_call, skip_signature_check=True)(module_call)
    finally:
        decorators.is_function = is_function


# --- Inductor: which module each call of a generated graph came from --------------------------


def _cache_apart(config):
    """Traced compiles get cache entries of their own: a graph generated by a process without
    fqntrace never comes back from the cache without its calls' modules. A no-op post-grad pass
    with a uuid salts inductor's (and AOTAutograd's) cache key; the generated code is unchanged.
    A pass the user set stays (then such graphs keep the compiled module's name)."""
    if config.post_grad_custom_post_pass is not None:
        return
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class FqntraceCacheSalt(CustomGraphPass):
        def __call__(self, graph):
            return None

        def uuid(self):
            return "fqntrace-module-names-1"

    config.post_grad_custom_post_pass = FqntraceCacheSalt()


_PROVENANCE = "set_kernel_post_grad_provenance_tracing"


def _record_kernel_sites(module):
    """Inductor calls set_kernel_post_grad_provenance_tracing(nodes, kernel_name) once per call
    it writes into a graph's code, in order, for extern kernels and fused kernels alike."""
    original = getattr(module, _PROVENANCE, None)
    if original is None or getattr(original, "_fqntrace_wrapped", False):
        return

    def set_kernel_post_grad_provenance_tracing(node_schedule, kernel_name, *args, **kwargs):
        sites = getattr(_capture, "sites", None)
        if sites is not None:
            try:
                sites.append(
                    (
                        _site_name(kernel_name),
                        _module_path(node_schedule),
                        _root_type(node_schedule),
                    )
                )
            except Exception:
                sites.append((str(kernel_name), "", ""))
        return original(node_schedule, kernel_name, *args, **kwargs)

    set_kernel_post_grad_provenance_tracing._fqntrace_wrapped = True
    setattr(module, _PROVENANCE, set_kernel_post_grad_provenance_tracing)
    if module.__name__ == "torch._inductor.debug":
        cpp = sys.modules.get("torch._inductor.codegen.cpp")
        if cpp is not None:  # imported it by name before we got here
            _record_kernel_sites(cpp)


def _site_name(kernel_name):
    """A fused CPU kernel records its profiling range as `graph_<graph id>_<kernel name>`."""
    name = str(kernel_name)
    if name.startswith("cpp_"):
        from torch._inductor.virtualized import V

        graph_id = getattr(V.graph, "graph_id", None)
        if graph_id is not None:
            return f"graph_{graph_id}_{name}"
    return name


def _stack(node):
    return node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")


def _stack_path(node):
    stack = _stack(node)
    return next(reversed(stack.values()))[0] if stack else None


def _root_type(node_schedule):
    """Class name of the outermost module in a call's stack: the compiled module, or for a
    compiled function the module it was given (named by its class, as a root is)."""
    from torch._inductor.utils import aggregate_origins

    for node in aggregate_origins(node_schedule):
        stack = _stack(node)
        if stack:
            cls = next(iter(stack.values()))[1]
            return getattr(cls, "__name__", str(cls).rsplit(".", 1)[-1])
    return ""


def _module_path(node_schedule):
    """The module path (relative to the compiled module, `.blocks.0.fc1`) of a call: the node it
    was made from when inductor knows it (extern kernels), else the deepest common ancestor of
    the modules of the nodes fused into it. Constants (nodes with no inputs) do not count: they
    are shared by whichever module happens to use them first."""
    from torch._inductor.utils import aggregate_origins

    origin = getattr(node_schedule, "origin_node", None)
    if origin is not None and _stack_path(origin) is not None:
        return _relative(_stack_path(origin))
    paths = set()
    for node in aggregate_origins(node_schedule):
        if node.op == "call_function" and node.all_input_nodes:
            path = _stack_path(node)
            if path is not None:
                paths.add(_relative(path))
    return _common_ancestor(paths)


_ROOT = re.compile(r"^L\['[^']+'\]")
_INDEX = re.compile(r"\[(\d+)\]|\['([^'\]]+)'\]")


def _relative(path):
    """`L['self'].blocks[0].fc1` -> `.blocks.0.fc1`: the path below the compiled frame's module
    argument (`self`, or a compiled function's module argument); "" when it has another form."""
    root = _ROOT.match(path)
    if root is None:
        return ""
    rest = _INDEX.sub(lambda m: "." + (m.group(1) or m.group(2)), path[root.end() :])
    if "(" in rest or "'" in rest:  # getattr(...) forms: not a plain attribute path
        return ""
    return "".join("." + part for part in rest.split(".") if part and part != "_orig_mod")


def _common_ancestor(paths):
    if not paths:
        return ""
    split = [p.split(".") for p in paths]
    common = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def _event_name(kernel_name):
    """The RecordFunction name a call shows up as: extern kernels and aten calls as their op
    (`extern_kernels.addmm` -> `aten::addmm`), fused kernels under their own name (they record a
    range only with TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1)."""
    name = str(kernel_name)
    if name.startswith("extern_kernels."):
        return "aten::" + name[len("extern_kernels.") :]
    if name.startswith("torch.ops."):
        name = name[len("torch.ops.") :]
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "mkldnn", "quantized", "_c10d_functional"):
        return f"{parts[0]}::{parts[1]}"
    return name


def _capture_graphs(compile_fx):
    original = compile_fx._compile_fx_inner
    if getattr(original, "_fqntrace_wrapped", False):
        return

    def _compile_fx_inner(gm, example_inputs, *args, **kwargs):
        outer = getattr(_capture, "sites", None)
        sites = _capture.sites = []
        try:
            compiled = original(gm, example_inputs, *args, **kwargs)
        finally:
            _capture.sites = outer
        try:
            _remember(compiled, sites)
        except Exception:
            pass  # the graph keeps the compiled module's name
        return compiled

    _compile_fx_inner._fqntrace_wrapped = True
    compile_fx._compile_fx_inner = _compile_fx_inner


def _remember(compiled, sites):
    calls = None
    if sites:
        from torch._inductor import config

        profiled = config.cpp.enable_kernel_profile
        calls = [
            (_event_name(name), path, root)
            for name, path, root in sites
            if profiled or not _is_fused(name)
        ]
        _save_sidecar(getattr(compiled, "_fx_graph_cache_key", None), calls)
    else:  # loaded from inductor's FX graph cache: nothing was generated
        calls = _load_sidecar(getattr(compiled, "_fx_graph_cache_key", None))
    if calls is not None:
        compiled._fqntrace_calls = calls


def _is_fused(site_name):
    return site_name.startswith("cpp_") or (site_name.startswith("graph_") and "_cpp_" in site_name)


def _sidecar_path(key):
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), "fqntrace", f"{key}.json")


def _save_sidecar(key, calls):
    if not key:
        return
    try:
        path = _sidecar_path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(calls, f)
        os.replace(tmp, path)
    except OSError:
        pass  # names then only last as long as this process


def _load_sidecar(key):
    if not key:
        return None
    try:
        with open(_sidecar_path(key)) as f:
            return [tuple(c) for c in json.load(f)]
    except (OSError, ValueError):
        return None


# --- Runtime: announce which graph runs ------------------------------------------------------

_graph_ids = {}  # id(compiled graph) -> (weak ref to it, graph id in the core; 0: no calls known)


def _graph_id(compiled):
    key = id(compiled)
    found = _graph_ids.get(key)
    if found is not None and found[0]() is compiled:
        return found[1]
    calls = compiled.__dict__.get("_fqntrace_calls")
    if calls is None:
        calls = _load_sidecar(getattr(compiled, "_fx_graph_cache_key", None))
    graph_id = 0
    if calls:
        roots = [c[2] for c in calls if len(c) > 2 and c[2]]
        root_type = max(set(roots), key=roots.count) if roots else ""
        graph_id = _native.load().register_graph(
            [c[0] for c in calls], [c[1] for c in calls], root_type
        )
    _graph_ids[key] = (
        weakref.ref(compiled, lambda _ref, key=key: _graph_ids.pop(key, None)),
        graph_id,
    )
    return graph_id


def _name_graph_calls(output_code):
    cls = output_code.CompiledFxGraph
    original = cls.__call__
    if getattr(original, "_fqntrace_wrapped", False):
        return
    C = _native.load()
    enter, leave = C.graph_enter, C.graph_exit

    def __call__(self, inputs):
        try:
            graph_id = _graph_id(self)
        except Exception:
            graph_id = 0
        if not graph_id:
            return original(self, inputs)
        enter(graph_id)
        try:
            return original(self, inputs)
        finally:
            leave()

    __call__._fqntrace_wrapped = True
    cls.__call__ = __call__
