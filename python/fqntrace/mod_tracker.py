"""ModTracker and ModuleTracker whose module names are the names in fqntrace's traces.

Drop-in versions of ``torch.distributed._tools.mod_tracker.ModTracker`` and
``torch.utils.module_tracker.ModuleTracker``: same attributes, same hooks, same order of events.
The one thing that changes on purpose is where names come from: ``fqntrace._hooks.name_of``, the
table the tracing hooks use, so an fqn seen in ``tracker.parents`` is the fqn of the module's spans
in a trace. Names are process-wide (a module keeps its name across trackers and sessions) instead
of per tracker instance.

How a module's backward is seen (as in torch): after its forward, a hook on the outputs that
require grad marks the start of its backward ("any" of them); a hook on the inputs that require
grad marks the end ("all" of them). A module whose inputs need no grad is closed by an engine
callback at the end of the next backward. Another engine callback resets ``parents`` when a
backward ends.

Where they differ from torch's, on purpose:
- names are fqntrace's, process-wide (see above); ``ModTracker.get_module(fqn)`` is added;
- the end-of-backward reset restores the modules whose forward is still running when the backward
  ran inside a forward (torch.autograd.grad in a module; torch's ModTracker raises there);
- a backward that raised leaves torch's trackers with a stale ``parents`` forever (their reset
  callback is believed pending); here the next forward notices and resets;
- ModTracker queues nothing for modules run under inference mode (torch fires a spurious post-bw
  hook for them at the next backward); under no_grad it does what torch does (reentrant
  checkpointing depends on it);
- ModuleTracker's post-forward hook is always called (torch's is not, so a module whose forward
  raised stays in ``parents``), it stays out of torch.compile'd modules like ModTracker does, and
  instead of keeping and removing one handle per hook it makes its hooks inert on exit;
- the recursion warning does not replace ``warnings.formatwarning`` process-wide.

Speed: the per-module callables given to autograd are built once per module (not twice per call),
the common single-tensor input/output is hooked with one ``Tensor.register_hook`` instead of
``register_multi_grad_hook``, and the usual argument shapes (tensors in a tuple/list/dict) are
scanned without ``tree_flatten``. Anything else takes torch's general path.
"""

import logging
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.autograd.graph import register_multi_grad_hook
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torch.utils._pytree import tree_flatten

from fqntrace import _hooks

__all__ = ["ModTracker", "ModuleTracker"]

logger = logging.getLogger(__name__)

_naming = _hooks.naming
_known_fqn = _hooks.known_fqn

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_graph_task_id = torch._C._current_graph_task_id
_inference_mode = torch.is_inference_mode_enabled
_engine = torch.autograd.Variable._execution_engine
_modules = sys.modules
_ref = weakref.ref
# Types that tree_flatten always treats as leaves and that are never tensors.
_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})


def _in_compiled_module():
    # torch's ModTracker stays out of torch.compile'd modules; dynamo is only consulted when it
    # has been imported (it cannot have compiled anything otherwise), so we never import it.
    frame = _modules.get("torch._dynamo.eval_frame")
    return frame is not None and frame._in_optimized_module


def _scan(node, out):
    """Appends the grad-requiring tensors of a tree of plain tuples/lists/dicts to `out`, in
    tree_flatten's order. False when the tree holds anything else (then use tree_flatten)."""
    kind = type(node)
    if kind is _Tensor or kind is _Parameter:
        if node.requires_grad:
            out.append(node)
        return True
    if kind in _SCALARS:
        return True
    if kind is tuple or kind is list:
        for child in node:
            if not _scan(child, out):
                return False
        return True
    if kind is dict:
        for child in node.values():
            if not _scan(child, out):
                return False
        return True
    return False


def _grad_tensors(tree):
    """The tensors requiring grad among `tree`'s pytree leaves (what torch's trackers hook)."""
    kind = type(tree)
    if kind is _Tensor or kind is _Parameter:
        return (tree,) if tree.requires_grad else ()
    found = []
    if kind is tuple:  # forward inputs: nearly always a flat tuple
        for item in tree:
            kind = type(item)
            if kind is _Tensor or kind is _Parameter:
                if item.requires_grad:
                    found.append(item)
            elif kind not in _SCALARS:
                break
        else:
            return found
        found = []
    if _scan(tree, found):
        return found
    leaves, _ = tree_flatten(tree)
    return [leaf for leaf in leaves if isinstance(leaf, _Tensor) and leaf.requires_grad]


def _hook_all(tensors, one, many):
    """Calls `many(grads)` once all of `tensors`' grads are computed (multi-grad "all" mode);
    `one(grad)` must be `many([grad])` (the single-tensor fast path)."""
    if len(tensors) == 1:
        tensors[0].register_hook(one)
    else:
        register_multi_grad_hook(tensors, many)


def _hook_any(tensors, fn):
    """Calls `fn(grad)` on the first of `tensors`' grads of each backward (multi-grad "any")."""
    if len(tensors) == 1:
        tensors[0].register_hook(fn)
    else:
        register_multi_grad_hook(tensors, fn, mode="any")


class _ModTrackerEntry(NamedTuple):
    """What ModTracker keeps per module: its name and the callables it gives autograd, built once
    per name."""

    naming: object  # fqntrace._hooks.naming() when built; a rename makes a new one
    fqn: str
    start_bw: Callable  # (*grads): the first grad of the module's outputs is computed
    end_bw: Callable  # (*grads): all grads of its inputs are computed
    end_bw_one: Callable  # (grad): end_bw for a single input tensor


class _ModuleTrackerEntry(NamedTuple):
    """What ModuleTracker keeps per module; enter_bw / exit_bw take a grad or a list of them."""

    naming: object
    fqn: str
    enter_bw: Callable
    exit_bw: Callable


def _module_entry(tracker, mod):
    """The tracker's cached entry for `mod`, rebuilt when fqntrace renames the module."""
    naming = _naming(mod)
    # The dict behind the WeakKeyDictionary, read directly: this runs twice per module call.
    entry = tracker._entries.data.get(_ref(mod))
    if entry is not None and entry.naming is naming:
        return entry
    entry = tracker._new_entry(mod, naming)
    tracker._entries[mod] = entry
    return entry


class _TrackerBase:
    """What both trackers share: parents, is_bw, naming, the end-of-backward callback."""

    parents: set
    """The fqns of the modules whose forward (or backward) is running, plus "Global"."""

    def __init__(self):
        self.parents = {"Global"}
        self._entries = weakref.WeakKeyDictionary()  # module -> entry, see _new_entry
        self._has_callback = False
        self._saved_state = None
        self._fw_pre_handle = None
        self._fw_post_handle = None

    @property
    def is_bw(self):
        """True while running during a backward pass."""
        return _graph_task_id() != -1

    def _new_entry(self, mod, naming):
        raise NotImplementedError

    def _pending_callbacks(self):
        return ()

    def _maybe_set_engine_callback(self):
        # Like torch, this assumes no concurrent backward calls.
        if self._has_callback:
            return
        for callback in self._pending_callbacks():
            _engine.queue_callback(callback)
        # torch resets parents to {"Global"} when the backward ends. When the backward runs inside
        # a forward (torch.autograd.grad in a module), the modules still running must come back.
        self._saved_state = self._save_state() if len(self.parents) > 1 else None
        _engine.queue_callback(self._backward_done)
        self._has_callback = True

    def _save_state(self):
        return set(self.parents), None

    def _restore_state(self, state):
        self.parents = state[0]

    def _backward_done(self):
        state, self._saved_state = self._saved_state, None
        if state is None:
            self.parents = {"Global"}
        else:
            self._restore_state(state)
        self._has_callback = False

    def _forget_failed_backward(self):
        # A forward outside backward while the end-of-backward callback is still pending: that
        # backward raised and its callbacks never ran. Without this, parents would never reset.
        self._backward_done()

    def get_known_fqn(self, mod):
        """The fqn of `mod` if fqntrace has named it (it ran, or a module above it ran), else None."""
        return _known_fqn(mod)

    def _install(self, always_call):
        self._fw_pre_handle = register_module_forward_pre_hook(self._fw_pre_hook)
        self._fw_post_handle = register_module_forward_hook(
            self._fw_post_hook, always_call=always_call
        )

    def _uninstall(self):
        for handle in (self._fw_pre_handle, self._fw_post_handle):
            if handle is not None:
                handle.remove()
        self._fw_pre_handle = self._fw_post_handle = None


class ModTracker(_TrackerBase):
    """Tracks the nn.Module hierarchy during forward and backward, like torch's ``ModTracker``.

    ``parents`` is the set of fqns of the modules currently running (forward, or backward) and
    always holds "Global"; ``is_bw`` tells whether a backward is running. Fqns are fqntrace's:
    the same as in fqntrace traces. ``get_module(fqn)`` maps an fqn back to the live module.

    Example::

        tracker = fqntrace.ModTracker()
        tracker.register_user_hooks(
            pre_fw_hook=lambda mod, inputs: print("running:", tracker.parents),
            pre_bw_hook=lambda mod, grads: print("backward of", tracker.get_known_fqn(mod)))
        with tracker:
            model(x).sum().backward()
        tracker.get_module("Model.layers.0")  # the live module with that fqn
    """

    def __init__(self):
        super().__init__()
        self._active_module_cnt = {}
        self._post_bw_callbacks_to_enqueue = []
        self._by_fqn = weakref.WeakValueDictionary()  # fqn -> module (weak)
        self._user_pre_fw_hook = None
        self._user_post_fw_hook = None
        self._user_pre_bw_hook = None
        self._user_post_bw_hook = None

    # --- public API -------------------------------------------------------------------------

    def get_module(self, fqn):
        """The live module whose fqn is `fqn`, or None. Any module fqntrace has named counts,
        also containers that never run (ModuleList). When several live modules share an fqn (two
        root modules of the same class), the one this tracker met most recently wins."""
        mod = self._by_fqn.get(fqn)
        if mod is not None and _known_fqn(mod) == fqn:
            return mod
        # Modules that never ran under this tracker (containers such as ModuleList, or modules
        # named by tracing): refill from fqntrace's table, keeping the entries that still hold.
        by_fqn = self._by_fqn
        for module, name in _hooks.named_modules():
            current = by_fqn.get(name)
            if current is None or _known_fqn(current) != name:
                by_fqn[name] = module
        mod = by_fqn.get(fqn)
        return mod if mod is not None and _known_fqn(mod) == fqn else None

    def register_user_hooks(
        self, pre_fw_hook=None, post_fw_hook=None, pre_bw_hook=None, post_bw_hook=None
    ):
        """Registers hooks called around each tracked module's forward and backward.

        ``pre_fw_hook(module, input)``, ``post_fw_hook(module, input, output)``,
        ``pre_bw_hook(module, grad_output)`` (when the first grad of its outputs is computed),
        ``post_bw_hook(module, grad_input)`` (when all grads of its inputs are computed). Any may
        be None. The module's fqn is in ``parents`` while each hook runs; the bw hooks receive
        None as the module if it was deleted before the backward.

        Raises AssertionError if a hook of a kind is given while one of that kind is registered
        (call ``clear_user_hooks`` first).
        """
        given = (
            ("pre_fw_hook", pre_fw_hook, self._user_pre_fw_hook),
            ("post_fw_hook", post_fw_hook, self._user_post_fw_hook),
            ("pre_bw_hook", pre_bw_hook, self._user_pre_bw_hook),
            ("post_bw_hook", post_bw_hook, self._user_post_bw_hook),
        )
        for kind, new, old in given:
            if new is not None and old is not None:
                raise AssertionError(
                    f"Only one {kind} can be registered at a time. Clear the existing hook by "
                    f"calling ``clear_user_hooks`` before registering a new one"
                )
        # As torch does, kinds given as None are cleared.
        self._user_pre_fw_hook = pre_fw_hook
        self._user_post_fw_hook = post_fw_hook
        self._user_pre_bw_hook = pre_bw_hook
        self._user_post_bw_hook = post_bw_hook

    def clear_user_hooks(self):
        """Removes the hooks registered with ``register_user_hooks``."""
        self._user_pre_fw_hook = None
        self._user_post_fw_hook = None
        self._user_pre_bw_hook = None
        self._user_post_bw_hook = None

    def __enter__(self):
        self._install(always_call=True)
        return self

    def __exit__(self, *args):
        self._uninstall()

    # --- internals --------------------------------------------------------------------------

    def _pending_callbacks(self):
        pending = self._post_bw_callbacks_to_enqueue
        callbacks = pending[::-1]
        pending.clear()
        return callbacks

    def _save_state(self):
        return set(self.parents), dict(self._active_module_cnt)

    def _restore_state(self, state):
        self.parents = state[0]
        self._active_module_cnt.update(state[1])

    def _new_entry(self, mod, naming):
        name = _known_fqn(mod)
        self._by_fqn[name] = mod
        wmod = weakref.ref(mod)
        counts = self._active_module_cnt

        def start_bw(*args):
            self._maybe_set_engine_callback()
            parents = self.parents
            if name in parents:
                counts[name] += 1
            else:
                counts[name] = 1
                parents.add(name)
            hook = self._user_pre_bw_hook
            if hook is not None:
                hook(wmod(), args)

        def end_bw(*args):
            hook = self._user_post_bw_hook
            if hook is not None:
                hook(wmod(), args)
            parents = self.parents
            if name in parents:
                counts[name] -= 1
                if counts[name] == 0:
                    parents.remove(name)
            elif _graph_task_id() == -1:
                raise RuntimeError(
                    f"fqntrace.ModTracker: the module hierarchy tracking is wrong ({name} ends "
                    f"but is not running)"
                )

        def end_bw_one(grad):
            end_bw([grad])

        return _ModTrackerEntry(naming, name, start_bw, end_bw, end_bw_one)

    def _fw_pre_hook(self, mod, input):
        if _in_compiled_module():
            return
        in_fw = _graph_task_id() == -1
        if in_fw and self._has_callback:
            self._forget_failed_backward()
        entry = _module_entry(self, mod)
        name = entry.fqn
        parents = self.parents
        if name in parents:
            if in_fw:
                warnings.warn(
                    f"fqntrace.ModTracker: {name} started while already running (a module calling "
                    f"itself?); the module hierarchy tracking may be messed up.",
                    stacklevel=2,
                )
            self._active_module_cnt[name] += 1
        else:
            self._active_module_cnt[name] = 1
            parents.add(name)
        if self._user_pre_fw_hook is not None:
            self._user_pre_fw_hook(mod, input)
        if in_fw:
            tensors = _grad_tensors(input)
            if tensors:
                _hook_all(tensors, entry.end_bw_one, entry.end_bw)
            elif not _inference_mode():
                # Nothing marks the end of its backward: the next backward's end does. (Under
                # inference mode there can be no backward of it; torch would still queue it.)
                self._post_bw_callbacks_to_enqueue.append(entry.end_bw)

    def _fw_post_hook(self, mod, input, output):
        if _in_compiled_module():
            return
        entry = _module_entry(self, mod)
        name = entry.fqn
        if self._user_post_fw_hook is not None:
            self._user_post_fw_hook(mod, input, output)
        in_fw = _graph_task_id() == -1
        parents = self.parents
        if name in parents:
            counts = self._active_module_cnt
            counts[name] -= 1
            if counts[name] == 0:
                parents.remove(name)
        elif in_fw:
            raise RuntimeError(
                f"fqntrace.ModTracker: the module hierarchy tracking is wrong ({name} ends but is "
                f"not running)"
            )
        if in_fw:
            tensors = _grad_tensors(output)
            if tensors:
                _hook_any(tensors, entry.start_bw)


class ModuleTracker(_TrackerBase):
    """Tracks the nn.Module hierarchy like ``torch.utils.module_tracker.ModuleTracker``, with
    fqntrace's fqns.

    ``parents`` holds the fqns of the running modules (forward or backward) and "Global";
    ``is_bw`` tells whether a backward is running. Hooks left on tensors stop acting when the
    context exits (torch removes them).
    """

    def __init__(self):
        super().__init__()
        self._scope = None

    def __enter__(self):
        # Entries close over the scope; a new one per context, so hooks from an earlier context
        # (still on tensors of a retained graph) stay inert.
        self._scope = [True]
        self._entries = weakref.WeakKeyDictionary()
        self._install(always_call=True)
        return self

    def __exit__(self, *args):
        self._uninstall()
        if self._scope is not None:
            self._scope[0] = False

    def _new_entry(self, mod, naming):
        name = _known_fqn(mod)
        live = self._scope

        def enter_bw(grads):
            if live[0]:
                self._maybe_set_engine_callback()
                self._enter(name, True)

        def exit_bw(grads):
            if live[0]:
                self._exit(name, True)

        return _ModuleTrackerEntry(naming, name, enter_bw, exit_bw)

    def _enter(self, name, is_bw):
        if name in self.parents:
            logger.info(
                "The module hierarchy tracking seems to be broken as this Module was already "
                "entered. %s during %s",
                name,
                "backward" if is_bw else "forward",
            )
        self.parents.add(name)

    def _exit(self, name, is_bw):
        if name in self.parents:
            self.parents.remove(name)
        else:
            logger.info(
                "The Module hierarchy tracking is confused as we're exiting a Module that was "
                "never entered. %s during %s",
                name,
                "backward" if is_bw else "forward",
            )

    def _fw_pre_hook(self, mod, input):
        if _in_compiled_module():  # torch's ModuleTracker fails there; stay out like ModTracker
            return
        if self._has_callback and _graph_task_id() == -1:
            self._forget_failed_backward()
        entry = _module_entry(self, mod)
        self._enter(entry.fqn, False)
        tensors = _grad_tensors(input)
        if tensors:
            _hook_all(tensors, entry.exit_bw, entry.exit_bw)

    def _fw_post_hook(self, mod, input, output):
        if _in_compiled_module():
            return
        entry = _module_entry(self, mod)
        self._exit(entry.fqn, False)
        tensors = _grad_tensors(output)
        if tensors:
            _hook_all(tensors, entry.enter_bw, entry.enter_bw)
