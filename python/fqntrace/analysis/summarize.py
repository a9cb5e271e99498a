"""Per-module aggregation of a trace: the summary dict `python -m fqntrace summary` prints as a
table (fqntrace.analysis.table) or as JSON.

Where the rules live: the native engine (fqntrace.analysis._native_summary, analysis/engine_*.cpp)
is the definition on every stream it takes; StreamSummary below is its Python reference (the same
rules, held equal by test_native_summary) for where the engine is not built or cannot take an
event; a file not in end order is put in end order and fed to the same engine (_summarize_whole).

Rules (<stem>.summary.json is `summary --json` of the finished trace, fqntrace/_summary_file.py):

* Only *top-level* cpu_ops carry time: a cpu_op (op, autograd node or engine wrapper) that no
  other cpu_op on its thread encloses. Module spans and record_function ranges do not hide an op,
  so a cpu_op inside a module span is still top-level; an op inside another op is not counted
  again. Summed, these times never count a nanosecond twice.
* Phase boundaries: a cpu_op whose phase differs from the nearest cpu_op around it (a forward
  re-run by activation checkpointing inside a backward node: recompute) also carries time, for
  its own fqn and phase, and that time is taken out of the enclosing counted op's.
* SELF time of a module and phase: top-level ops whose args.fqn is exactly that module.
  TOTAL time: the same for the module and every descendant fqn ("fqn." prefix).
* ops: operators (cpu_ops that are neither autograd nodes nor engine wrappers, i.e. without
  "Fwd thread id"), at any nesting level; self_ops / ops as for time.
* calls: forward module spans of that fqn (recompute spans are not calls).
* step_ms: all top-level op time of the trace (every module, Global included, all phases).
* Backend work ranges of collectives (args.async_work) run beside the training thread: they are
  reported as comm_ms and never added to op time.
* Memory (FQNTRACE_MEMORY: "[memory]" events): alloc_bytes, freed_bytes, peak_bytes,
  activation_bytes, grad_bytes per phase, by fqntrace.analysis.memory's rules (docs/memory.md).
"""

import json
import os
from typing import NamedTuple

from fqntrace.analysis import (
    errors,
    memory,
    sampled,
    step_times,
    trace_events,
    trace_format,
    tracestream,
    whole_file,
)
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.summarize_native import (
    _flat_ranges,
    _NativeCannot,
    _totals_from,
    encode_event,
)
from fqntrace.analysis.summary_totals import Totals, event_name, summary_result
from fqntrace.analysis.trace_events import PHASES


def _valid_slices(events):
    """The X events that carry time and a module: numeric ts, dur >= 0, args.fqn a string."""
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or trace_events.is_module_view(e):
            continue
        args = e.get("args")
        if (
            trace_events.is_number(e.get("ts"))
            and trace_events.is_number(e.get("dur"))
            and e["dur"] >= 0
            and isinstance(args, dict)
            and isinstance(args.get("fqn"), str)
        ):
            yield e


def _owner(args):
    return args.get("phase"), args.get("fqn")


def summarize(trace, exclude_steps=step_times.DEFAULT_EXCLUDED):
    """The summary of a loaded trace (a whole_file.LoadedTrace) in the JSON shape of
    <stem>.summary.json.
    Holds every event; summarize_stream() gives the same numbers reading a file as a stream.
    With training steps (ProfilerStep#N ranges) the summary also has per-step numbers;
    `exclude_steps`: step numbers left out of the per-step medians (default {0})."""
    return _summarize_whole(trace, exclude_steps)[0]


def _summarize_whole(trace, exclude_steps):
    """(summary, step_times.StepTimes or None) of a loaded trace in any order (one not written by
    the core: a torch.profiler trace, an edited one). Not a definition of its own: the slices are
    put in end order per thread (post-order of nest()'s tree) and counted by the native engine
    when it is built and the trace has no memory reports, else by StreamSummary, with the other
    events (memory, the module table) read in file order, as a stream reads them."""
    slices = list(_valid_slices(trace.events))
    parents, _, starts, ends = trace_events.nest(slices)
    order = _post_order(parents, starts, ends)
    ranges = step_times.step_ranges(zip(slices, starts, ends))
    if _native is not None and not any(memory.is_memory_event(e) for e in trace.events):
        # Without memory reports, no event but a slice depends on where it stands: the other
        # events first, then the slices in end order, is the engine's stream.
        in_order = {id(e) for e in slices}
        events = [e for e in trace.events if id(e) not in in_order]
        events += [slices[i] for i in order]
        try:
            engine = _native.Engine(True, _flat_ranges(ranges))  # fed as JSON Lines blocks
            for k in range(0, len(events), _BLOCK_EVENTS):
                block = b"\n".join([encode_event(e) for e in events[k : k + _BLOCK_EVENTS]])
                if engine.feed_block(block, 0, len(block)) < 0:
                    raise _NativeCannot(trace.path)
            return _native_result(
                engine,
                ranges,
                exclude_steps,
                trace.header,
                trace.tail,
                trace.incomplete,
                trace.path,
            )
        except (_NativeCannot, TypeError, ValueError, UnicodeError, OverflowError):
            pass  # an event the engine does not take, or partial overlaps: the Python loop
    per_step = step_times.StepTimes.from_ranges(ranges) if ranges else None
    acc = StreamSummary(per_step)
    acc.exclude_steps = exclude_steps
    acc.in_end_order = False
    for e in trace.events:
        acc.totals.add_in_file_order(e)
    for i in order:
        acc.add_slice(slices[i])
    return acc.result(trace.header, trace.tail, trace.incomplete, trace.path), per_step


_BLOCK_EVENTS = 8192


def _post_order(parents, starts, ends):
    """The slices' indices with every slice after the slices it encloses (as the core writes
    them), siblings in order of start: the order StreamSummary counts in."""
    children = {}
    for i, parent in enumerate(parents):
        children.setdefault(parent, []).append(i)
    for kids in children.values():
        kids.sort(key=lambda i: (starts[i], -ends[i], -i))
    order = []
    stack = [(-1, iter(children.get(-1, ())))]
    while stack:
        node, kids = stack[-1]
        child = next(kids, None)
        if child is None:
            stack.pop()
            if node >= 0:
                order.append(node)
        else:
            stack.append((child, iter(children.get(child, ()))))
    return order


# ---------------------------------------------------------------------------------------------
# The same numbers from a stream of events, in memory bounded by the modules.
#
# The core writes each range when it ends, so on one thread an enclosing range comes after
# everything it encloses (post-order). Each thread keeps a stack of *pending* subtrees: ranges
# whose enclosing op has not been read yet. Whether an op's time counts depends only on its
# nearest enclosing op, so a pending subtree is kept as its *frontier*: the ops in it with no op
# above them inside the subtree, grouped by owner (phase, fqn): per owner the summed duration,
# the summed time of counted ops below them (to be taken out of whichever op counts above them),
# and per op name the self time it adds if it counts. When an op arrives it settles the frontier
# of the subtrees it encloses: a group of another owner counts (committed), a group of its own
# owner does not (its excluded time moves up). Neighbouring pending subtrees at the same depth
# (args.depth) share every future enclosing range, so they are merged: the stack never holds
# more entries than the nesting is deep, and a frontier never more groups than
# owners x op names.


class NotPostOrder(Exception):
    """A thread's events are not in end order (not a file the core wrote): use summarize()."""


class Group(NamedTuple):
    """The ops of one owner (phase, fqn) on a pending subtree's frontier."""

    dur_ns: int  # their summed duration
    excluded_ns: int  # the time of counted ops below them, taken out of whichever op counts
    contributions: dict  # (op name, step) -> [self_ns, count]: what they add if they count
    phase_totals: dict  # their module's Totals phase record; None: no self time (a work range)


class _Pending:
    __slots__ = ("start", "end", "depth", "groups")

    def __init__(self, start, end, depth, groups):
        self.start = start
        self.end = end
        self.depth = depth  # None when the trace has no args.depth
        self.groups = groups  # owner -> Group


def _merge_groups(into, groups):
    for owner, g in groups.items():
        mine = into.get(owner)
        if mine is None:
            into[owner] = g
            continue
        for key, (ns, count) in g.contributions.items():
            t = mine.contributions.get(key)
            if t is None:
                mine.contributions[key] = [ns, count]
            else:
                t[0] += ns
                t[1] += count
        # A collective's work range shares the owner but adds no time: the op's record wins.
        into[owner] = Group(
            mine.dur_ns + g.dur_ns,
            mine.excluded_ns + g.excluded_ns,
            mine.contributions,
            g.phase_totals if mine.phase_totals is None else mine.phase_totals,
        )


class StreamSummary:
    """Feed it every event of one trace in file order (add()), then result().

    The Python reference of the summary's rules: the native engine (analysis/engine_*.cpp) is the
    definition every verb uses where it is built, and applies these same rules; this class runs
    where it is not built (no simdjson at install time), for traces not in end order
    (_summarize_whole puts them in it), for events the engine does not take (a >64-bit integer),
    and in the tests that hold the engine to it (test_native_summary)."""

    TOL = trace_events.NEST_TOLERANCE_NS
    # A live view (top) counts each outermost range by itself instead of merging neighbours,
    # so that the time it logs per commit belongs to one step.
    count_outermost_apart = False

    def __init__(self, per_step=None):
        self.totals = Totals()
        self.totals.step_cpu = per_step
        self.threads = {}  # (pid, tid) -> [stack of _Pending, last end]
        # step_times.StepTimes with the trace's step ranges (a first pass), or None: each op's
        # self time is then also kept per step (contributions keyed by (name, step)).
        self.per_step = per_step

    # False: slices come in any order on a thread, already put in post-order by the caller
    # (_summarize_whole), so a range ending before one read earlier is no reason to stop.
    in_end_order = True

    def add(self, e):
        self.totals.add_in_file_order(e)
        self.add_slice(e)

    def add_slice(self, e):
        """What a slice adds, without the file-order part (memory, module table) add() does."""
        if not isinstance(e, dict) or e.get("ph") != "X" or trace_events.is_module_view(e):
            return
        args = e.get("args")
        ts = e.get("ts")
        dur = e.get("dur")
        if (
            type(args) is not dict
            or type(args.get("fqn")) is not str
            or not trace_events.is_number(ts)
            or not trace_events.is_number(dur)
            or dur < 0
        ):
            return
        start = round(ts * 1000)
        end = start + round(dur * 1000)
        self.seen(e, start, end)
        is_op = e.get("cat") == "cpu_op"
        p = self.totals.add_event(e, start, is_op)
        depth = args.get("depth")
        if type(depth) is not int:
            depth = None
        key = (str(e.get("pid")), str(e.get("tid")))
        thread = self.threads.get(key)
        if thread is None:
            thread = self.threads[key] = [[], end]
        elif end < thread[1] - self.TOL and self.in_end_order:
            raise NotPostOrder(key)
        else:
            thread[1] = max(thread[1], end)
        stack = thread[0]
        # The pending subtrees this range encloses (nest()'s rule: inside when it ends by our
        # end and starts in our extent; equal extents: the later in the file is the outer one).
        children = []
        while stack:
            c = stack[-1]
            if c.start < start or c.end > end + self.TOL or not (c.start < end or c.start == start):
                break
            if (
                c.start == start
                and c.end == end
                and depth is not None
                and c.depth is not None
                and self.in_end_order
                and c.depth < depth
            ):
                raise NotPostOrder(key)  # an outer range written before its inner one
            children.append(stack.pop())
        if is_op:
            owner = _owner(args)
            excluded = 0
            for c in children:
                for g_owner, g in c.groups.items():
                    if g_owner != owner:
                        excluded += g.dur_ns
                        self.commit(g_owner, g, start)
                    else:
                        excluded += g.excluded_ns
            step = None if self.per_step is None else self.per_step.step_of(e.get("pid"), start)
            contrib = (
                {} if p is None else {(event_name(e), step): [max(end - start - excluded, 0), 1]}
            )
            groups = {owner: Group(end - start, excluded, contrib, p)}
        else:
            groups = {}
            for c in reversed(children):
                _merge_groups(groups, c.groups)
        if stack and depth is not None and stack[-1].depth == depth:
            below = stack[-1]  # a sibling: every range enclosing one encloses the other
            if depth == 0 and self.count_outermost_apart:
                # Final already (commit_pending(outermost_only) would count it now): counted
                # before this one comes, its time stays at its own start (top: in its step).
                for g_owner, g in below.groups.items():
                    self.commit(g_owner, g, below.start)
                stack[-1] = _Pending(start, end, depth, groups)
            else:
                _merge_groups(below.groups, groups)
                below.end = max(below.end, end)
        else:
            stack.append(_Pending(start, end, depth, groups))

    def seen(self, e, start, end):
        """Every valid slice, with its times in ns, as it is read (for subclasses)."""

    def commit(self, owner, group, when_ns):
        """A frontier group's ops count: their self time is added. when_ns: the start of the
        range that holds them (theirs when outermost), in the step their starts lie in."""
        p = group.phase_totals
        if p is not None:
            phase, fqn = owner
            for (name, step), (ns, count) in group.contributions.items():
                Totals.add_time(p, name, ns, count)
                if self.per_step is not None:
                    self.per_step.add_to_step(step, fqn, phase, ns)

    def commit_pending(self, outermost_only=False):
        """Counts what is still pending (at the end of the file). outermost_only: only subtrees
        at depth 0, which nothing can enclose any more (for a live view of a running job)."""
        for stack, _ in self.threads.values():
            keep = []
            for pending in stack:
                if outermost_only and pending.depth != 0:
                    keep.append(pending)
                    continue
                for owner, g in pending.groups.items():
                    self.commit(owner, g, pending.start)
            stack[:] = keep

    def result(self, header, tail, incomplete, path):
        self.commit_pending()
        merged = header.get("ranks")
        return summary_result(
            self.totals,
            header,
            tail,
            incomplete,
            path,
            merged if isinstance(merged, list) else None,
            self.per_step,
            self.exclude_steps,
        )

    exclude_steps = step_times.DEFAULT_EXCLUDED


def summarize_stream(path, note=lambda message: None, exclude_steps=step_times.DEFAULT_EXCLUDED):
    """The summary of a trace file read as a stream (tracestream): the same numbers as
    summarize(whole_file.load(path)). A trace with training steps is read twice (its step ranges
    first). A file whose threads are not in end order (not written by the core) is loaded whole
    instead."""
    return summarize_with_steps(path, note, exclude_steps)[0]


def summarize_with_steps(
    path, note=lambda message: None, exclude_steps=step_times.DEFAULT_EXCLUDED
):
    """(summary, step_times.StepTimes or None) of a trace file, read as a stream by the native
    engine, or by its Python fallback (StreamSummary; sampled.SampledSummary for a sampled trace)
    where the engine is not built or cannot take an event; a file whose threads are not in end
    order loaded whole and put in it."""
    ranges = step_times.read_step_ranges(path)
    try:
        with tracestream.TraceStream(path) as stream:
            header = stream.header
        p = sampled.sample_of(header)
        sampling = None if p is None else (p, header.get("sampleNodeSpans") is True)
        if _native is not None:
            try:
                return _summarize_native(path, ranges, note, exclude_steps, sampling)
            except _NativeCannot:
                pass  # an event the engine does not take (a >64-bit integer, say)
        elif not _slow_noted:
            _note_slow(note)
        return _summarize_python(path, ranges, note, exclude_steps, sampling)
    except NotPostOrder:
        return _summarize_loaded(path, note, exclude_steps)


def _summarize_python(path, ranges, note, exclude_steps, sampling=None):
    """The engine's fallback over the stream: StreamSummary, or for a sampled trace (sampling: its
    p and node spans) sampled.SampledSummary. Raises NotPostOrder."""
    with tracestream.TraceStream(path) as stream:
        per_step = step_times.StepTimes.from_ranges(ranges) if ranges else None
        if sampling is None:
            acc = StreamSummary(per_step)
        else:
            acc = sampled.SampledSummary(*sampling, per_step)
        acc.exclude_steps = exclude_steps
        add = acc.add
        for batch, _ in stream.batches():
            for e in batch:
                add(e)
        _note_cut(stream, note)
        return acc.result(stream.header, stream.tail, stream.incomplete, path), acc.per_step


def _summarize_loaded(path, note, exclude_steps):
    """A file not in end order (not written by the core): loaded whole."""
    trace = whole_file.load(path)
    _note_cut(trace, note, len(trace.events))
    return _summarize_whole(trace, exclude_steps)


# ---------------------------------------------------------------------------------------------
# The native engine (fqntrace.analysis._native_summary, analysis/summary_engine.cpp): the same
# per-event rules as StreamSummary above, fed the core's event lines as bytes; the sums it returns
# become the summary through summary_result() like StreamSummary's (summarize_native.py: the event
# text the engine reads, its pid keys, its sums as Totals).

try:
    from fqntrace.analysis import _native_summary as _native
except ImportError:  # not built, or a CPU without AVX2: StreamSummary does the work
    _native = None
_slow_noted = False


def _note_slow(note):
    global _slow_noted
    _slow_noted = True
    note(
        "the native summary module is not built in this installation (it is where simdjson's "
        "headers are there at install time: libsimdjson-dev, then reinstall fqntrace); "
        "summarizing in Python, about 10x slower"
    )


def _summarize_native(path, ranges, note, exclude_steps, sampling=None):
    """The engine over the stream; sampling: (p, node spans) of a sampled trace, its rules."""
    p, node_spans = sampling or (0, False)
    with tracestream.TraceStream(path) as stream:
        engine = _native.Engine(
            stream.format == trace_format.JSONL,
            _flat_ranges(ranges),
            sample=p,
            node_spans=node_spans,
        )

        def block(chunk, start, end):
            n = engine.feed_block(chunk, start, end)
            if n == -2:
                raise NotPostOrder(path)
            return None if n < 0 else n

        def event(e):  # the general path's events (another layout): one line each
            try:
                text = encode_event(e)
            except (TypeError, ValueError, UnicodeError, OverflowError):
                raise _NativeCannot(path) from None
            n = engine.feed_event(text)
            if n == -2:
                raise NotPostOrder(path)
            if n < 0:
                raise _NativeCannot(path)

        stream.feed(block, event)
        _note_cut(stream, note)
        args = engine, ranges, exclude_steps, stream.header, stream.tail, stream.incomplete, path
        return _native_sampled_result(p, *args) if p else _native_result(*args)


def _native_sums(engine, ranges):
    """(sums, Totals, StepTimes or None) of an engine that has read every event."""
    sums = engine.result()
    totals = _totals_from(sums)
    per_step = None
    if ranges:
        per_step = step_times.StepTimes.from_ranges(ranges)
        for step, fqn, phase, ns in sums["step_times"]:
            per_step.add_to_step(step, fqn, PHASES[phase], ns)
        for step, fqn, phase, ns in sums["step_cpu"]:
            per_step.add_cpu_to_step(step, fqn, PHASES[phase], ns)
    return sums, totals, per_step


def _native_sampled_result(p, engine, ranges, exclude_steps, header, tail, incomplete, path):
    sums, totals, per_step = _native_sums(engine, ranges)
    variance = {(fqn, PHASES[phase]): v for fqn, phase, v in sums["variance"]}
    out = sampled.sampled_result(
        p, totals, variance, per_step, exclude_steps, header, tail, incomplete, path
    )
    return out, per_step


def _native_result(engine, ranges, exclude_steps, header, tail, incomplete, path):
    """(summary, StepTimes or None) from an engine that has read every event."""
    _, totals, per_step = _native_sums(engine, ranges)
    acc = StreamSummary(per_step)
    acc.totals = totals
    acc.exclude_steps = exclude_steps
    return acc.result(header, tail, incomplete, path), per_step


def _note_cut(trace, note, n_events=None):
    if trace.cut:
        if n_events is None:
            n_events = trace.events_read
        partial = " (dropped a partial last line)" if trace.dropped_partial else ""
        hint = (
            ""
            if trace_format.is_gzip(trace.path)  # repair rewrites plain text only
            else f"; {errors.repair_hint(trace.path)} to close the file"
        )
        note(
            f"{trace.path} is cut off (no closing tail); summarizing its {n_events} complete "
            f"events{partial}{hint}"
        )


def is_summary_path(path):
    return path.lower().endswith(".summary.json")


def load_summary(path, text=None):
    """A summary file (the JSON shape above). Raises TraceError."""
    if text is None:
        text = whole_file.read_text(path)
    try:
        obj = json.loads(text)
    except ValueError as error:
        detail = errors.describe_json_error(error)
        raise TraceError(
            f"{path}: not valid JSON ({detail}); a .summary.json "
            "is written whole at exit, so this one is damaged or was cut off"
        ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("modules"), dict):
        raise TraceError(
            f"{path}: not a summary (no \"modules\" object); "
            "pass the trace (.json / .jsonl) instead"
        )
    for fqn, entry in obj["modules"].items():
        if not isinstance(entry, dict):
            raise TraceError(f"{path}: module {fqn!r} is not an object; not an fqntrace summary")
    return obj


def filter_depth(summary, depth):
    """The summary (of one trace, or crossrank's of several) with only the modules at most
    `depth` levels below the root."""
    if depth is None:
        return summary
    out = dict(summary)
    out["modules"] = {
        f: m for f, m in summary["modules"].items() if trace_events.fqn_depth(f) <= depth
    }
    return out


SUMMARY_FILE_LIMIT = 1 << 28  # a summary file is small; a bigger non-trace is not one


def load_for_summary(path, note=lambda message: None, exclude_steps=step_times.DEFAULT_EXCLUDED):
    """A summary dict from a trace (.json / .jsonl / .gz, cut-off ones too), read as a stream,
    or from a .summary.json. `note(message)` hears about a cut-off trace summarized as far as
    it goes."""
    if is_summary_path(path):
        return load_summary(path)
    try:
        return summarize_stream(path, note, exclude_steps)
    except TraceError:
        # A summary under another name (`summary --json > out.json`) is read as one.
        try:
            if os.path.getsize(path) < SUMMARY_FILE_LIMIT and not trace_format.is_gzip(path):
                return load_summary(path)
        except (OSError, TraceError):
            pass
        raise
