"""The numbers a summary is made of: per-module sums (Totals), filled event by event, and
summary_result(), which turns them into the summary dict. summarize.py (op time by the full
trace's rules) and sampled.py (a sampled trace's estimates) both fill them."""

from fqntrace.analysis import memory, step_times, trace_events
from fqntrace.analysis.trace_events import PHASES, ancestors, device_use, lineage, ms, rank_of

TOP_OPS = 5
ENGINE_WRAPPER = "autograd::engine::evaluate_function:"


def new_phase():
    return {
        "self_ns": 0,
        "self_ops": 0,
        "self_flops": 0,
        "comm_ns": 0,
        "comm_bytes": 0,
        "collectives": 0,
        "device_ns": 0,
        "cpu_ns": 0,
        "top": {},
    }


class Totals:
    """Per-module sums, filled event by event. Everything but op *self time* is known from the
    event alone; self time needs the nesting (which op encloses which), added by add_time()."""

    def __init__(self):
        self.modules = {}
        self.first_seen = {}
        self.declared_types = {}  # fqn -> class, from the module table (modules that never ran)
        self.memory = memory.MemoryStats()
        self.device_seen = False  # device events with an fqn (annotated torch.profiler trace)
        self.cpu_seen = False  # ranges with self_cpu_ns (plugin/thread_cpu.h)
        self.step_cpu = None  # step_times.StepTimes the CPU times also go to, per step

    def memory_event(self, e):
        """A "[memory]" event, in file order (its module gets a row even without ops)."""
        fqn = e["args"].get("fqn")
        if isinstance(fqn, str) and fqn not in self.modules:
            self.module(fqn)
            ts = e.get("ts")
            self.first_seen[fqn] = round(ts * 1000) if trace_events.is_number(ts) else 0
        self.memory.add(e)

    def add_in_file_order(self, e):
        """Any event, in file order (where it stands matters, not what it encloses): what the
        memory numbers need from it, and the classes of the module table's entries."""
        if not isinstance(e, dict) or trace_events.is_module_view(e):
            return
        if e.get("ph") == "M":
            entry = trace_events.module_entry(e)
            if entry is not None:
                self.declared_types[entry[0]] = entry[1]
        elif memory.is_memory_event(e):
            self.memory_event(e)
        elif e.get("ph") == "X" and isinstance(e.get("args"), dict) and "module_type" in e["args"]:
            self.memory.module_end(e)

    def module(self, fqn):
        m = self.modules.get(fqn)
        if m is None:
            m = self.modules[fqn] = {
                "module_type": "",
                "calls": 0,
                "phases": {p: new_phase() for p in PHASES},
            }
        return m

    def note_start(self, fqn, start):
        """Keeps the module's earliest start so far (the table's order among siblings)."""
        first = self.first_seen.get(fqn)
        if first is None or start < first:
            self.first_seen[fqn] = start

    def add_event(self, e, start, is_op):
        """The counts of one valid slice; returns its phase record when its time may count
        as self time (an op in a known phase, not a collective's backend work), else None."""
        args = e["args"]
        fqn = args["fqn"]
        m = self.module(fqn)
        self.note_start(fqn, start)
        phase = args.get("phase")
        cpu = args.get("self_cpu_ns")
        if phase in PHASES and trace_events.is_number(cpu) and cpu >= 0:
            # A module scope's or outermost backward op's own CPU time, already without that of
            # the measured ranges inside it: counted as it comes, no nesting needed.
            ns = round(cpu)
            m["phases"][phase]["cpu_ns"] += ns
            self.cpu_seen = True
            if self.step_cpu is not None:
                self.step_cpu.add_cpu(e, start, fqn, phase, ns)
        if not is_op and e.get("cat") in trace_events.DEVICE_CATS:
            # a torch.profiler trace annotated by fqntrace: the kernel's launching op's module
            if phase in PHASES:
                m["phases"][phase]["device_ns"] += round(e["dur"] * 1000)
                self.device_seen = True
            return None
        if not is_op and e.get("cat") == "user_annotation" and "module_type" in args:
            if not m["module_type"] and isinstance(args.get("module_type"), str):
                m["module_type"] = args["module_type"]
            if phase == "forward":
                m["calls"] += 1
            return None
        if phase in PHASES and args.get("async_work"):
            # a collective's backend work range (written as a user_annotation, as Kineto
            # does; older traces had cpu_op): communication time
            m["phases"][phase]["comm_ns"] += round(e["dur"] * 1000)
            return None
        if phase not in PHASES or not is_op:
            return None  # record_function ranges carry no time of their own
        p = m["phases"][phase]
        if "collective" in args:
            p["collectives"] += 1
            if isinstance(args.get("bytes"), int):
                p["comm_bytes"] += args["bytes"]
        elif isinstance(args.get("flops"), int):
            p["self_flops"] += args["flops"]
        if "Fwd thread id" not in args and not event_name(e).startswith(ENGINE_WRAPPER):
            p["self_ops"] += 1  # an operator, not an autograd node or the engine's wrapper
        return p

    @staticmethod
    def add_time(p, name, ns, count=1):
        p["self_ns"] += ns
        top = p["top"].get(name)
        if top is None:
            top = p["top"][name] = [0, 0]
        top[0] += ns
        top[1] += count


def event_name(e):
    name = e.get("name")
    return name if isinstance(name, str) else "?"


def summary_result(
    totals,
    header,
    tail,
    incomplete,
    path,
    merged_ranks,
    per_step=None,
    exclude_steps=step_times.DEFAULT_EXCLUDED,
):
    modules = totals.modules
    first_seen = totals.first_seen

    def module(fqn):
        return totals.module(fqn)

    # Containers that never run a forward of their own (a ModuleList) still get a row, so
    # every level of the tree has its total.
    for fqn in list(modules):
        for ancestor in ancestors(fqn):
            if ancestor not in modules:
                module(ancestor)
                first_seen[ancestor] = first_seen.get(fqn, 0)
            else:
                first_seen[ancestor] = min(first_seen.get(ancestor, 0), first_seen.get(fqn, 0))
    order = sorted(modules, key=lambda f: (f == "Global", first_seen.get(f, 0), f))
    step_ns = sum(p["self_ns"] for m in modules.values() for p in m["phases"].values())
    # Subtree sums through the tree, not a scan of every module per module.
    below = {fqn: {p: [] for p in PHASES} for fqn in modules}
    below_fqns = {fqn: [] for fqn in modules}
    for fqn, m in modules.items():
        for module in lineage(fqn):
            if module in below:
                below_fqns[module].append(fqn)
                for phase in PHASES:
                    below[module][phase].append(m["phases"][phase])
    tail = tail if isinstance(tail, dict) else {}
    with_memory = tail.get("memory") is True or totals.memory.seen
    totals.memory.finish()
    out_modules = {}
    for fqn in order:
        m = modules[fqn]
        entry = {
            "module_type": m["module_type"] or totals.declared_types.get(fqn, ""),
            "calls": m["calls"],
        }
        for phase in PHASES:
            p = m["phases"][phase]
            subtree = below[fqn][phase]
            tops = sorted(p["top"].items(), key=lambda kv: (-kv[1][0], kv[0]))[:TOP_OPS]
            entry[phase] = {
                "total_ms": ms(sum(s["self_ns"] for s in subtree)),
                "self_ms": ms(p["self_ns"]),
                "ops": sum(s["self_ops"] for s in subtree),
                "self_ops": p["self_ops"],
                "flops": sum(s["self_flops"] for s in subtree),
                "self_flops": p["self_flops"],
                "comm_ms": ms(p["comm_ns"]),
                "comm_bytes": p["comm_bytes"],
                "collectives": p["collectives"],
            }
            if with_memory:
                entry[phase].update(totals.memory.fields(fqn, phase, below_fqns[fqn]))
            if totals.device_seen:
                entry[phase]["device_ms"] = ms(sum(s["device_ns"] for s in subtree))
                entry[phase]["self_device_ms"] = ms(p["device_ns"])
            if totals.cpu_seen:
                entry[phase]["cpu_ms"] = ms(sum(s["cpu_ns"] for s in subtree))
                entry[phase]["self_cpu_ms"] = ms(p["cpu_ns"])
            entry[phase]["top_ops"] = [
                {"name": name, "ms": ms(ns), "count": count} for name, (ns, count) in tops
            ]
        out_modules[fqn] = entry
    out = {
        "trace": header.get("traceName", path),
        "rank": rank_of(header),
        "step_ms": ms(step_ns),
        "dropped_events": tail.get("dropped_events", 0),
        "complete": not incomplete,
        "modules": out_modules,
    }
    device = device_use(tail)
    if device is not None:  # device_events: False with used, the times are all host-side
        out["device"] = {**device, "device_events": bool(totals.device_seen)}
    step_summary = per_step.summary(exclude_steps, out_modules) if per_step is not None else None
    if step_summary is not None:
        out["steps"] = step_summary
    if merged_ranks is not None:  # a merged trace: every rank's time is added up
        out["rank"] = None
        out["ranks"] = [r.get("rank") for r in merged_ranks if isinstance(r, dict)]
    return out
