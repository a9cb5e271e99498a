"""What a trace's events mean, without reading or writing a file: the phases, the categories the
verbs treat apart, times as integer nanoseconds, nesting per thread, module spans and the module
table, where compiled code ran, fqn paths and the header's rank.

Times: ``ts`` / ``dur`` are microseconds with three decimals; everything here works in integer
nanoseconds (:func:`to_ns`) so nesting checks and sums are exact.
"""

import functools

PHASES = ("forward", "backward", "recompute")
# Backward and recompute module spans on each thread's module track (docs/trace-format.md): a
# view of ranges the trace already has, never counted again.
MODULE_VIEW_CAT = "module_span"
# A torch.profiler trace's device events (kernels, copies, fills): device time, not op time.
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
NEST_TOLERANCE_NS = 1  # ts and dur are each rounded to 1 ns when written


def printable(text):
    """A name read from a trace, shown on a terminal: every character that is not printable
    (an escape sequence's ESC, a newline, a tab) as its Python escape, so a name cannot move
    the cursor, recolour the screen or break a table's row."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_ns(us):
    """Microseconds (3 decimals) → integer nanoseconds."""
    return int(round(us * 1000))


def format_us(ns):
    """Integer nanoseconds → microseconds text with exactly three decimals, as the core writes."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def thread_key(event):
    return (str(event.get("pid")), str(event.get("tid")))


def nest(slices):
    """Per (pid, tid), the enclosing slice of each slice.

    Returns (parents, overlap, starts, ends): parents[i] is the index of slice i's innermost
    enclosing slice or -1; overlap is the first partial overlap found as (i, j) with i the earlier
    slice, or None (a partially overlapping slice is treated as a sibling); starts / ends are the
    slices' times in ns. Slices with equal extent nest by their args.depth when present, else the
    later one in the file is the outer one (the core writes a range when it ends, so an enclosing
    range comes after what it encloses).
    """
    n = len(slices)
    starts = [0] * n
    ends = [0] * n
    keys = [None] * n
    threads = {}
    for i, e in enumerate(slices):
        start = round(e["ts"] * 1000)
        end = start + round(e["dur"] * 1000)
        starts[i] = start
        ends[i] = end
        args = e.get("args")
        depth = args.get("depth", 0) if type(args) is dict else 0
        if type(depth) is not int:
            depth = 0
        keys[i] = (start, -end, depth, -i)
        thread = (str(e.get("pid")), str(e.get("tid")))
        members = threads.get(thread)
        if members is None:
            threads[thread] = [i]
        else:
            members.append(i)
    parents = [-1] * n
    overlap = None
    tol = NEST_TOLERANCE_NS
    for indices in threads.values():
        indices.sort(key=keys.__getitem__)
        stack = []
        for i in indices:
            start = starts[i]
            end = ends[i]
            while stack:
                p = stack[-1]
                p_end = ends[p]
                if end <= p_end + tol and (start < p_end or start == starts[p]):
                    break  # i lies inside p
                if overlap is None and start < p_end - tol and end > p_end + tol:
                    overlap = (p, i)
                stack.pop()
            if stack:
                parents[i] = stack[-1]
            stack.append(i)
    return parents, overlap, starts, ends


def is_module_view(event):
    """A backward or recompute module span of the module track (cat "module_span")."""
    return event.get("cat") == MODULE_VIEW_CAT


def module_span_fqn(event):
    """The fqn of a module span (user_annotation with args.module_type), else None."""
    if event.get("cat") != "user_annotation":
        return None
    args = event.get("args")
    if not isinstance(args, dict) or "module_type" not in args:
        return None
    fqn = args.get("fqn")
    return fqn if isinstance(fqn, str) else None


MODULE_ENTRY = "fqntrace_module"  # a metadata event of the trace's module table


def module_entry(event):
    """(fqn, module_type) of an entry of the module table (docs/trace-format.md, *Module table*:
    a module fqntrace named, which may never have run as a scope of its own), else None."""
    if event.get("ph") != "M" or event.get("name") != MODULE_ENTRY:
        return None
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    fqn, module_type = args.get("fqn"), args.get("module_type")
    if not isinstance(fqn, str) or not fqn or not isinstance(module_type, str):
        return None
    return fqn, module_type


COMPILED_CODE_NAMES = ("CompiledFunction", "CompiledFunctionBackward")
COMPILED_REGION_PREFIX = "Torch-Compiled Region"


class CompiledCode:
    """Where compiled code ran: the time ranges, per thread, of Dynamo's compiled regions and of
    AOTAutograd's CompiledFunction / CompiledFunctionBackward (docs/compile.md)."""

    def __init__(self, slices):
        import bisect

        self._bisect = bisect
        ranges = {}
        for e in slices:
            name = e.get("name")
            if isinstance(name, str) and (
                name in COMPILED_CODE_NAMES or name.startswith(COMPILED_REGION_PREFIX)
            ):
                ranges.setdefault(thread_key(e), []).append((e["ts"], e["ts"] + e["dur"]))
        self._starts = {}
        self._ends = {}
        for key, spans in ranges.items():
            spans.sort()
            merged = []
            for start, end in spans:
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            self._starts[key] = [m[0] for m in merged]
            self._ends[key] = [m[1] for m in merged]

    def __bool__(self):
        """Did compiled code run at all?"""
        return bool(self._starts)

    def contains(self, event):
        starts = self._starts.get(thread_key(event))
        if not starts:
            return False
        i = self._bisect.bisect_right(starts, event["ts"]) - 1
        # 2 ns of slack: ts and dur are rounded to the nanosecond separately.
        return i >= 0 and event["ts"] + event["dur"] <= self._ends[thread_key(event)][i] + 0.002


@functools.lru_cache(maxsize=1 << 14)  # a trace has few fqns, each walked once per op
def lineage(fqn):
    """The modules from the root down to `fqn`, itself last: `Net`, `Net.blocks`,
    `Net.blocks.0` for `Net.blocks.0` (a tuple; the root's is just itself)."""
    parts = fqn.split(".")
    return tuple(".".join(parts[:k]) for k in range(1, len(parts) + 1))


def ancestors(fqn):
    """The modules above `fqn`, root first (`Net`, `Net.blocks` for `Net.blocks.0`)."""
    return lineage(fqn)[:-1]


def has_ancestor_in(fqn, fqns):
    """Is a module above `fqn` in `fqns`? (An empty name before a leading dot is no module.)"""
    return any(a in fqns for a in ancestors(fqn) if a)


def fqn_depth(fqn):
    return 0 if fqn == "Global" else fqn.count(".")


def ms(ns):
    """Integer nanoseconds → milliseconds as the summaries write them (6 decimals)."""
    return round(ns / 1e6, 6)


def device_use(tail):
    """What a trace's tail says of the GPU its process used (docs/trace-format.md): {"used":
    False}, or {"used": True, "type": "cuda" | "rocm", "count": n}, with FQNTRACE_DEVICE's
    "collected" counts (and "off": why none) when it collected; None when it says nothing (a
    trace written before fqntrace watched, a C++ program, a cut-off file)."""
    device = tail.get("device") if isinstance(tail, dict) else None
    if not isinstance(device, dict) or not isinstance(device.get("used"), bool):
        return None
    out = {"used": False}
    if device["used"]:
        count = device.get("count")
        out = {
            "used": True,
            "type": device.get("type") if isinstance(device.get("type"), str) else "gpu",
            "count": count if isinstance(count, int) and not isinstance(count, bool) else None,
        }
    collected = device.get("collected")
    if isinstance(collected, dict):
        out["collected"] = {
            k: v
            for k, v in collected.items()
            if (k == "off" and isinstance(v, str))
            or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
        }
    return out


def rank_of(header):
    """The rank a trace's header names (distributedInfo.rank), None when it names none."""
    info = header.get("distributedInfo")
    return info.get("rank") if isinstance(info, dict) else None
