"""An independent oracle for fqntrace's per-op attribution, built only from torch's own hooks.

It runs in its own pass (never together with a fqntrace session: a dispatch mode and a
RecordFunction observer in one pass would see every op twice) and logs, for every op that reaches
the Python dispatch key, the fqn and phase fqntrace's rules (docs/architecture.md) say it must get:

- forward: the innermost running module, from global forward pre/post hooks
  (``register_module_forward_hook(always_call=True)``, so a forward that raises, such as a
  checkpoint recompute stopped early, still closes its frame); ``Global`` outside modules. Names are
  given by torch's own ``torch.distributed._tools.mod_tracker.ModTracker._get_mod_name`` (root =
  class name, children by attribute).
- recompute: a module frame opened while an autograd graph task runs on the thread (activation
  checkpointing re-running a forward), and everything inside it.
- backward: the module whose forward created the running autograd node
  (``torch._C._current_autograd_node()``). Which module created which node is learnt in the forward
  with a ``TorchFunctionMode``: after each torch function returns, the graph behind its tensor
  outputs and arguments (arguments: in-place ops re-point their grad_fn) is walked back until
  already-known nodes, and every new node gets the fqn of the innermost module at the time of the
  call. This covers the nodes composite functions create inside (``F.linear`` makes a TBackward0
  that is no output's grad_fn).
  Nodes created outside the forward, by ops that run in backward with grad mode on (double
  backward, ``create_graph=True``), belong to the module those ops are attributed to; the oracle
  learns them op by op (the outputs of each such op, once the autograd layer has given them their
  grad_fn). Nodes of custom ``autograd.Function``s are not learnt (``Function.apply`` is no torch
  function, so the oracle cannot tell which call made them): ops under them are unattributable.
- AccumulateGrad: the module owning the parameter, the first owner in ``named_modules()`` order
  (tied weights); a leaf no module owns gets the enclosing frame or ``Global``, like other backward
  work outside nodes.
- work of the engine inside a node's ``evaluate_function`` but outside the node itself (summing
  gradients into input buffers, reducing a broadcast gradient): ``_current_autograd_node()`` is set
  for the whole of ``evaluate_function``, so it gets the node's fqn, as fqntrace's rule says.

Besides ops, it logs each autograd node that runs, as the two ranges the trace has for it (the
engine's ``autograd::engine::evaluate_function: <node>`` and the node's own), from a pre-hook
registered on every node it learnt in the forward (and on the parameters' AccumulateGrad nodes),
with the node's attribution.

The modes change nothing the models here do: a TorchFunctionMode makes ``has_torch_function`` true,
which turns off the inference fast paths of nn.MultiheadAttention / nn.TransformerEncoderLayer, off
in training anyway. The dispatch mode does change a few ops (ATen's "composite compliant" paths),
listed at SAME_OP and MODE_DETACH with their reasons; tests/python/test_fidelity.py shows each one
with and without a mode. Oracle threads are native thread ids, the trace's tids are the same ids.

The dispatch mode sees ops *below* autograd, i.e. a subsequence of what the observer records
(composites such as ``aten::linear`` reach it as ``aten::t`` + ``aten::addmm``; the kernels' inner
calls never reach it). `match` therefore checks that the oracle's op sequence is, per thread and in
start order, a subsequence of the trace's ``cpu_op`` sequence with equal (name, fqn, phase).

Order: the oracle logs an op when it reaches the Python key, i.e. after the autograd layer has saved
the op's inputs for backward and before it saves its outputs. An op that a saved-tensor pack hook
runs (activation checkpointing's ``x.detach()``) therefore starts, in the trace, *inside* the op it
saves for (the one logged just before it, or just after it), while the oracle logs it next to that
op. `match` aligns the other ops first, then finds each pack-hook op among the trace ops from the
previous aligned op to the end of the next aligned op's subtree.
"""

import inspect
import sys
import threading
import weakref
from collections import namedtuple

import numpy as np
import torch
from torch.distributed._tools.mod_tracker import ModTracker
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# One op (or node range) seen by the oracle. `fqn` is None when the oracle cannot attribute it
# (`why` says why); `artifact` is set for ops that exist only because of the oracle's own mode
# (MODE_DETACH); `in_pack_hook` for ops a saved-tensor pack hook ran.
Op = namedtuple("Op", "tid name fqn phase why artifact in_pack_hook")
# One cpu_op event of a trace, in start order.
TraceOp = namedtuple("TraceOp", "tid name fqn phase ts dur depth")

_graph_task_id = torch._C._current_graph_task_id
_current_node = torch._C._current_autograd_node
_AccumulateGrad = torch._C._functions.AccumulateGrad
_CustomFunctionNode = torch.autograd.function.BackwardCFunction
_grad_enabled = torch.is_grad_enabled

_detach = torch.ops.aten.detach.default
_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
_ADInplaceOrView = torch._C.DispatchKey.ADInplaceOrView

# Ops that exist only because the oracle's dispatch mode is on. Saving an autograd node's output
# (and unpacking it in backward) shallow-copies the tensor (TensorImpl::shallow_copy_and_detach);
# while a Python dispatch mode is active, torch routes that copy to the mode as an aten::detach.
# Without a mode it is a plain C++ copy that no observer can see, so the traced pass has no such op.
# They are told apart from real detach calls by how they arrive: a dispatcher call reaches the
# Python key with the keys above it (ADInplaceOrView, Autograd*) excluded; these do not.
MODE_DETACH = "aten::detach issued by shallow_copy_and_detach because a dispatch mode is on"

_top_saved_tensors_hooks = torch._C._autograd._top_saved_tensors_default_hooks


def _in_pack_hook():
    """Whether the op now reaching the Python key was called by the innermost saved-tensor pack
    hook (its Python frame is among the few callers of __torch_dispatch__)."""
    hooks = _top_saved_tensors_hooks(False)
    if hooks is None:
        return False
    code = getattr(inspect.unwrap(hooks[0]), "__code__", None)
    frame = sys._getframe(3)  # _in_pack_hook <- Oracle.dispatch <- __torch_dispatch__ <- caller
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


UNKNOWN_NODE = "node created outside any torch function the oracle saw"
CUSTOM_FUNCTION = "node of a custom autograd.Function"


class _Frame:
    __slots__ = ("fqn", "phase")

    def __init__(self, fqn, phase):
        self.fqn, self.phase = fqn, phase


class Oracle:
    """``with Oracle() as o: <forward + backward>`` then ``o.ops`` (list of Op, in the
    order the ops started on each thread)."""

    def __init__(self):
        self.ops = []
        self._namer = ModTracker()  # only its naming function is used; it is never entered
        self._tls = threading.local()
        self._node_fqn = {}  # autograd node -> fqn of the module that created it
        self._hooked = set()  # AccumulateGrad nodes whose runs are logged
        self._param_owner = {}  # id(parameter) -> fqn of its first owner
        self._keep = []  # keeps the keys above alive (ids stay unique)
        self._handles = []
        self._modes = None
        self._active = False
        self._lock = threading.Lock()

    # --- module frames -----------------------------------------------------------------------
    def _stack(self):
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def _name(self, module):
        is_root = module not in self._namer._known_modules
        fqn = self._namer._get_mod_name(module)
        if is_root:
            for sub_name, sub in module.named_modules():
                owner = f"{fqn}.{sub_name}" if sub_name else fqn
                for param in sub.parameters(recurse=False):
                    if param.requires_grad and id(param) not in self._param_owner:
                        self._param_owner[id(param)] = owner
                        self._keep.append(param)
        return fqn

    def _pre_hook(self, module, args):
        stack = self._stack()
        in_backward = _graph_task_id() != -1
        recompute = in_backward or (stack and stack[-1].phase == "recompute")
        stack.append(_Frame(self._name(module), "recompute" if recompute else "forward"))

    def _post_hook(self, module, args, output):
        self._stack().pop()

    # --- attribution ---------------------------------------------------------------------------
    def _forward_fqn(self):
        stack = self._stack()
        return stack[-1].fqn if stack else "Global"

    def attribute(self):
        """(fqn, phase, why) of an op starting now on this thread."""
        stack = self._stack()
        if stack and stack[-1].phase == "recompute":
            return stack[-1].fqn, "recompute", "module re-run in backward"
        if _graph_task_id() == -1:
            return self._forward_fqn(), "forward", "innermost module"
        node = _current_node()
        if node is None:
            return self._forward_fqn(), "backward", "backward, outside any node"
        if isinstance(node, _AccumulateGrad):
            owner = self._param_owner.get(id(node.variable))
            if owner is None:
                return self._forward_fqn(), "backward", "AccumulateGrad of a leaf no module owns"
            return owner, "backward", "AccumulateGrad owner"
        fqn = self._node_fqn.get(node, UNKNOWN_NODE)
        if isinstance(fqn, str) and fqn in (UNKNOWN_NODE, CUSTOM_FUNCTION):
            return None, "backward", f"{fqn}: {node.name()}"
        return fqn, "backward", f"node {node.name()}"

    def _learn_nodes(self, tensors, fqn=None, walk=True):
        """Gives every node behind `tensors` that is not known yet `fqn` (the current forward
        fqn by default), and hooks it to log its own range (and the engine's wrapper) when it
        runs. With walk=False only the tensors' own grad_fn are learnt."""
        if fqn is None:
            fqn = self._forward_fqn()
        todo = []
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                todo.append(t.grad_fn)
        while todo:
            node = todo.pop()
            if node is None or node in self._node_fqn or node in self._hooked:
                continue
            if isinstance(node, _AccumulateGrad):
                self._hooked.add(node)
            elif isinstance(node, _CustomFunctionNode):
                self._node_fqn[node] = CUSTOM_FUNCTION
            else:
                self._node_fqn[node] = fqn
                if walk:
                    todo.extend(next_node for next_node, _ in node.next_functions)
            self._keep.append(node)
            self._handles.append(node.register_prehook(self._node_starts(node.name())))

    def _node_starts(self, name):
        # A node pre-hook runs inside the engine's "evaluate_function: <node>" range, just before
        # the node's own range opens, with the node as the current autograd node.
        def hook(grad_outputs):
            self._learn_made_in_backward()
            self.log(ENGINE_WRAPPER + name)
            self.log(name)

        return hook

    def log(self, name, artifact=None, in_pack_hook=False):
        if not self._active:  # a hook that outlived the pass (parameters' AccumulateGrad nodes)
            return
        fqn, phase, why = self.attribute()
        op = Op(threading.get_native_id(), name, fqn, phase, why, artifact, in_pack_hook)
        with self._lock:
            self.ops.append(op)
        return op

    def _learn_made_in_backward(self):
        """Learns the nodes the ops run in backward with grad mode on have created by now."""
        made = getattr(self._tls, "made", None)
        if made:
            self._tls.made = []
            for refs, fqn in made:
                self._learn_nodes([r() for r in refs], fqn, walk=False)

    def dispatch(self, func, args, kwargs):
        """Logs `func` and runs it."""
        self._learn_made_in_backward()
        if func is _detach and not _excluded(_ADInplaceOrView):
            op = self.log(func._schema.name, artifact=MODE_DETACH)
        else:
            op = self.log(func._schema.name, in_pack_hook=_in_pack_hook())
        out = func(*args, **kwargs)
        if op is not None and op.phase != "forward" and _grad_enabled():
            # The autograd layer gives the outputs their grad_fn after this returns.
            refs = [weakref.ref(t) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            if refs:
                if not hasattr(self._tls, "made"):
                    self._tls.made = []
                self._tls.made.append((refs, op.fqn))
        return out

    # --- context manager -----------------------------------------------------------------------
    def __enter__(self):
        self._handles = [
            register_module_forward_pre_hook(self._pre_hook),
            register_module_forward_hook(self._post_hook, always_call=True),
        ]
        self._modes = (_NodeMode(self), _OpMode(self))
        for mode in self._modes:
            mode.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc):
        self._active = False
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        for handle in self._handles:  # module hooks and node pre-hooks
            handle.remove()
        self._handles, self._keep = [], []
        self._node_fqn.clear()
        self._hooked.clear()
        return False


class _NodeMode(TorchFunctionMode):
    """Learns which module's forward created each autograd node."""

    def __init__(self, oracle):
        super().__init__()
        self.oracle = oracle

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        oracle = self.oracle
        oracle._learn_made_in_backward()  # first: torch.autograd.grad returns such nodes
        stack = oracle._stack()
        # Forward (and recompute, whose nodes are never run) creates the nodes backward runs.
        if _graph_task_id() == -1 or (stack and stack[-1].phase == "recompute"):
            flat_out, _ = tree_flatten(out)
            flat_in, _ = tree_flatten((args, kwargs))
            oracle._learn_nodes(flat_out + flat_in)
        return out


class _OpMode(TorchDispatchMode):
    """Logs every op that reaches the Python key, at its start."""

    def __init__(self, oracle):
        super().__init__()
        self.oracle = oracle

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.oracle.dispatch(func, args, kwargs or {})


def run_oracle(step):
    """Runs `step()` under a fresh Oracle; returns its ops."""
    with Oracle() as oracle:
        step()
    return oracle.ops


# --- the trace side ----------------------------------------------------------------------------
def trace_ops(trace):
    """The trace's cpu_op events per thread, in start order: {tid: [TraceOp]}.

    Events are written in end order per thread; a stable sort on (start, depth) gives start order
    (a parent starts no later than its children and is less deep; two siblings starting at the
    same instant keep their end order, which is their start order)."""
    per_tid = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "cpu_op":
            continue
        args = e["args"]
        per_tid.setdefault(e["tid"], []).append(
            TraceOp(
                e["tid"],
                e["name"],
                args.get("fqn"),
                args.get("phase"),
                e["ts"],
                e["dur"],
                args.get("depth", 0),
            )
        )
    for ops in per_tid.values():
        ops.sort(key=lambda o: (o.ts, o.depth))
    return per_tid


def inheritance_breaks(trace):
    """cpu_op events whose (fqn, phase) differs from the cpu_op directly enclosing them, as
    (enclosing name, fqn, phase, name, fqn, phase). fqntrace gives an op inside another op the
    enclosing op's attribution; this covers the ops the oracle cannot see (composites like
    aten::linear enclose ops it sees; kernels' inner calls are enclosed by ops it sees)."""
    per_tid = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            per_tid.setdefault(e["tid"], []).append(e)
    breaks = []
    for events in per_tid.values():
        events.sort(key=lambda e: (e["ts"], e["args"].get("depth", 0)))
        stack = []
        for e in events:
            depth = e["args"].get("depth", 0)
            while stack and stack[-1]["args"].get("depth", 0) >= depth:
                stack.pop()
            if stack and e["cat"] == "cpu_op" and stack[-1]["cat"] == "cpu_op":
                outer, inner = stack[-1]["args"], e["args"]
                if (outer.get("fqn"), outer.get("phase")) != (inner.get("fqn"), inner.get("phase")):
                    breaks.append(
                        (
                            stack[-1]["name"],
                            outer.get("fqn"),
                            outer.get("phase"),
                            e["name"],
                            inner.get("fqn"),
                            inner.get("phase"),
                        )
                    )
            stack.append(e)
    return breaks


Result = namedtuple("Result", "matched total misses artifacts")

# Names that differ only because the oracle's dispatch mode is on: ATen's composite code takes a
# "composite compliant" path when any tensor is subclass-like, and at::isTensorSubclassLike() is
# true for every tensor while a Python dispatch mode is active. Both sides are compared under
# canonical names:
# - at::native::reshape returns _reshape_alias, or a plain view under a mode: the trace has
#   aten::_reshape_alias where the oracle sees aten::view, and the node it creates is
#   ReshapeAliasBackward0 where the oracle's is ViewBackward0;
# - in-place vs out-of-place: F.linear's bias on an N-d input (output.add_(bias) vs at::add), the
#   autograd engine summing two gradients for one input (InputBuffer::accumulate: add_ vs add),
#   the index_select and max backward formulas (index_add_ vs index_add, scatter_ vs scatter):
#   an aten op "X_" in one pass is "X" in the other, so a trailing "_" is not compared;
# - max's backward (value_selecting_reduction_backward) makes its zeros with at::zeros, or with
#   grad.new_zeros under a mode.
SAME_OP = {
    "aten::_reshape_alias": "aten::view",
    "aten::new_zeros": "aten::zeros",
    "ReshapeAliasBackward0": "ViewBackward0",
}
ENGINE_WRAPPER = "autograd::engine::evaluate_function: "


def canonical(name):
    if name.startswith(ENGINE_WRAPPER):
        return ENGINE_WRAPPER + canonical(name[len(ENGINE_WRAPPER) :])
    name = SAME_OP.get(name, name)
    if name.startswith("aten::") and name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


def _key(name, fqn, phase):
    return (canonical(name), fqn, phase)


def _lcs_pairs(a, b):
    """Index pairs (i, j) of a longest common subsequence of the integer sequences a and b."""
    n, m = len(a), len(b)
    b = np.asarray(b, dtype=np.int64)
    rows = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(1, n + 1):
        prev = rows[i - 1]
        # rows[i][j] = max(rows[i][j-1], prev[j], prev[j-1] + 1 if a[i-1] == b[j-1]):
        # a running maximum of max(prev[j], prev[j-1] + 1 where equal).
        take = prev.copy()
        hit = np.flatnonzero(b == a[i - 1]) + 1
        take[hit] = np.maximum(take[hit], prev[hit - 1] + 1)
        rows[i] = np.maximum.accumulate(take)
    pairs, i, j = [], n, m
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1] and rows[i, j] == rows[i - 1, j - 1] + 1:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif rows[i - 1, j] == rows[i, j]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _subtree_end(trace, j):
    """Index of the first trace op after j that is not nested in trace[j]."""
    end, depth = trace[j].ts + trace[j].dur, trace[j].depth
    k = j + 1
    while k < len(trace) and trace[k].depth > depth and trace[k].ts <= end:
        k += 1
    return k


def match(oracle_ops, trace_per_tid):
    """Aligns, per thread, the oracle's ops with the trace's cpu_op events on (name, fqn, phase):
    a longest common subsequence, so `matched == total` exactly when the oracle's sequence is a
    subsequence of the trace's, and one disagreement cannot hide the agreement after it. Ops run
    by a saved-tensor pack hook are then placed among the trace ops left over, between the previous
    aligned op and the end of the next aligned op's subtree (see the module's docstring).
    Returns Result(matched, total, misses, artifacts); a miss is (oracle op, the trace ops of the
    same name where it should have been).
    Ops the oracle marks as artifacts of its own dispatch mode are left out of the alignment and
    returned in `artifacts`, for the caller to check."""
    matched, misses = 0, []
    per_tid = {}
    artifacts = [op for op in oracle_ops if op.artifact]
    for op in oracle_ops:
        if not op.artifact:
            per_tid.setdefault(op.tid, []).append(op)
    for tid, ops in per_tid.items():
        trace = trace_per_tid.get(tid, [])
        keys = [_key(t.name, t.fqn, t.phase) for t in trace]
        main = [i for i, op in enumerate(ops) if not op.in_pack_hook]
        ids = {}
        a = [ids.setdefault(_key(ops[i].name, ops[i].fqn, ops[i].phase), len(ids)) for i in main]
        b = [ids.get(k, -1) for k in keys]
        partner = {main[x]: j for x, j in _lcs_pairs(a, b)}
        used = set(partner.values())
        # For each oracle op: the trace index of the previous / next aligned main op.
        prev_j, next_j = [-1] * len(ops), [len(trace)] * len(ops)
        j = -1
        for i in range(len(ops)):
            prev_j[i] = j
            j = partner.get(i, j)
        j = len(trace)
        for i in range(len(ops) - 1, -1, -1):
            next_j[i] = j
            j = partner.get(i, j)
        for i, op in enumerate(ops):
            if i in partner or not op.in_pack_hook:
                continue
            hi = _subtree_end(trace, next_j[i]) if next_j[i] < len(trace) else len(trace)
            key = _key(op.name, op.fqn, op.phase)
            for k in range(prev_j[i] + 1, hi):
                if k not in used and keys[k] == key:
                    partner[i] = k
                    used.add(k)
                    break
        matched += len(partner)
        for i, op in enumerate(ops):
            if i not in partner:
                name = canonical(op.name)
                hi = _subtree_end(trace, next_j[i]) if next_j[i] < len(trace) else len(trace)
                near = [t for t in trace[prev_j[i] + 1 : hi] if canonical(t.name) == name]
                misses.append((op, near))
    return Result(matched, len(oracle_ops) - len(artifacts), misses, artifacts)


def describe(result, limit=15):
    """Human-readable misses, for assertion messages."""
    lines = [f"{result.matched}/{result.total} ops agree"]
    for op, near in result.misses[:limit]:
        lines.append(
            f"  oracle {op.name} fqn={op.fqn} phase={op.phase} ({op.why}); "
            "trace ops of that name where it belongs: "
            + (", ".join(f"{t.fqn}/{t.phase}@{t.ts}" for t in near[:4]) or "none")
        )
    if len(result.misses) > limit:
        lines.append(f"  ... and {len(result.misses) - limit} more")
    return "\n".join(lines)
