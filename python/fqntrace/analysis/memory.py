"""Per-module memory numbers from a trace's "[memory]" events (FQNTRACE_MEMORY), by the rules of
docs/memory.md, fed in file order:

* alloc / freed: bytes allocated / freed while the module's own ops ran (self; the summary adds
  descendants, as for time);
* activation: bytes allocated in forward (or recompute) and freed during backward, credited to
  the allocating module and phase;
* grad: bytes allocated in backward that outlive it (freed outside backward, or never): the
  gradients kept in .grad (AccumulateGrad keeps the tensor the computing node allocated);
* peak: the highest total of live bytes allocated during one run of the module (subtree
  included). A run is a stretch of reports on one thread inside the module's subtree and in one
  phase; a report elsewhere, or the module's own range ending, ends it.

A free whose allocation is not in the trace counts as freed, never against live bytes.
"""

from fqntrace.analysis.trace_events import PHASES, ancestors

FIELDS = ("alloc_bytes", "freed_bytes", "peak_bytes", "activation_bytes", "grad_bytes")


def is_memory_event(e):
    return e.get("ph") == "i" and e.get("name") == "[memory]" and isinstance(e.get("args"), dict)


def _numbers():
    return {field: 0 for field in FIELDS}


class MemoryStats:
    def __init__(self):
        self.nodes = {}  # fqn -> {phase: numbers}
        self.chains = {}  # fqn -> [self, parent, ..., root] as node dicts
        self.runs = {}  # thread -> [[node, phase, start_seq, live, peak]]
        self.live = {}  # (pid, address) -> (bytes, seq, thread, node, phase); a merged trace
        # has several processes, whose addresses may repeat
        self.seq = 0
        self.seen = False
        self.live_grad = {}  # id(node) -> backward bytes still alive at finish() (gradients)

    def _node(self, fqn):
        node = self.nodes.get(fqn)
        if node is None:
            node = self.nodes[fqn] = {p: _numbers() for p in PHASES}
        return node

    def _chain(self, fqn):
        chain = self.chains.get(fqn)
        if chain is None:
            # innermost first; an empty name before a leading dot is no module
            chain = [self._node(fqn)] + [self._node(a) for a in reversed(ancestors(fqn)) if a]
            self.chains[fqn] = chain
        return chain

    @staticmethod
    def _close(run):
        numbers = run[0][run[1]]
        numbers["peak_bytes"] = max(numbers["peak_bytes"], run[4])

    def add(self, e):
        """A "[memory]" event (is_memory_event)."""
        args = e["args"]
        fqn, phase, ptr, size = (
            args.get("fqn"),
            args.get("phase"),
            args.get("Addr"),
            args.get("Bytes"),
        )
        if not isinstance(fqn, str) or phase not in PHASES or type(size) is not int:
            return
        self.seen = True
        thread = (str(e.get("pid")), str(e.get("tid")))
        chain = self._chain(fqn)
        runs = self.runs.setdefault(thread, [])
        keep = []
        for run in runs:
            if run[1] != phase or not any(run[0] is n for n in chain):
                self._close(run)
            else:
                keep.append(run)
        runs[:] = keep
        for n in chain:
            if not any(run[0] is n for run in runs):
                runs.append([n, phase, self.seq, 0, 0])
        own = chain[0][phase]
        if size > 0:
            own["alloc_bytes"] += size
            for run in runs:
                run[3] += size
                run[4] = max(run[4], run[3])
            self.live[(thread[0], ptr)] = (size, self.seq, thread, chain[0], phase)
        elif size < 0:
            own["freed_bytes"] += -size
            block = self.live.pop((thread[0], ptr), None)
            if block is not None:
                b_size, b_seq, b_thread, b_node, b_phase = block
                for run in runs:
                    if b_thread == thread and b_seq >= run[2]:
                        run[3] -= b_size
                if phase == "backward" and b_phase != "backward":
                    b_node[b_phase]["activation_bytes"] += b_size
                if phase != "backward" and b_phase == "backward":
                    b_node[b_phase]["grad_bytes"] += b_size
        self.seq += 1

    def module_end(self, e):
        """A module's range (args.module_type) was read: its run ends."""
        args = e["args"]
        node = self.nodes.get(args.get("fqn"))
        runs = self.runs.get((str(e.get("pid")), str(e.get("tid"))))
        if node is None or not runs:
            return
        keep = []
        for run in runs:
            if run[0] is node and run[1] == args.get("phase"):
                self._close(run)
            else:
                keep.append(run)
        runs[:] = keep

    def finish(self):
        for runs in self.runs.values():
            for run in runs:
                self._close(run)
            runs.clear()
        # Recomputed at each call (a live view asks again later), never added twice.
        self.live_grad = {}
        for b_size, _, _, b_node, b_phase in self.live.values():
            if b_phase == "backward":
                self.live_grad[id(b_node)] = self.live_grad.get(id(b_node), 0) + b_size

    def fields(self, fqn, phase, subtree):
        """The phase object's memory fields: sums over `subtree` (fqns), the module's own peak."""
        out = _numbers()
        for f in subtree:
            node = self.nodes.get(f)
            if node is not None:
                for field in ("alloc_bytes", "freed_bytes", "activation_bytes", "grad_bytes"):
                    out[field] += node[phase][field]
                if phase == "backward":
                    out["grad_bytes"] += self.live_grad.get(id(node), 0)
        node = self.nodes.get(fqn)
        out["peak_bytes"] = node[phase]["peak_bytes"] if node is not None else 0
        return out
