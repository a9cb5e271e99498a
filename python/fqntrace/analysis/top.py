"""`python -m fqntrace top TRACE...`: a live per-module view of a running job.

Each trace file is followed (follower.Follower: only the bytes appended since the last read,
one partial line kept) and its events go through the summary's streaming rules, so memory is
bounded by the modules, never by the file: the native engine's (fed the appended event lines as
they are, NativeLiveSummary) when it is built, else summarize.StreamSummary's (LiveSummary). A
range's time shows once the outermost range around it has ended (a module's forward, a step).

The recent window is in *trace* time: the last --window seconds before the newest event of each
file, kept as one bucket per second. Steps/s counts `ProfilerStep#N` ranges (fqntrace's steps).
With steps, the "/st" columns give `summary`'s per-step number live: per module and phase the
median over the last RECENT_STEPS finished steps of its time in each, the steps in
--exclude-steps (the warm-up, step 0) left out; "cpu/st" the same of its thread CPU time (all
phases) when the trace recorded it. A range's time goes to the step whose range holds
the end of the outermost range around it (the moment it is counted).

The screen is drawn with `rich` (the optional extra `fqntrace[top]`); keys are read from the
terminal in cbreak mode: q quits, s changes the order, up/down (or k/j) move, Enter/space
expands or collapses the selected module, + / - expand or collapse all.
"""
import bisect
import collections
import glob
import os
import select
import sys
import time

from fqntrace.analysis import sampled as sampled_trace
from fqntrace.analysis import follower, stats, step_times, summarize, trace_events, tracestream
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import PHASES

INSTALL_HINT = ("fqntrace top needs the optional package rich: pip install 'fqntrace[top]' "
                "(or: pip install rich)")
PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "recompute": "rcmp"}
SORTS = ("tree", "recent", "total")
STEP_PREFIX = "ProfilerStep#"
READ_SHARE = 0.8  # of each refresh interval spent reading when the job writes faster than that
RECENT_STEPS = 20  # steps the per-step medians are taken over
CPU = "cpu"  # the "phase" of CPU times in the per-step samples: all phases of a module


class LiveWindow:
    """What the view keeps besides the summary's sums: per second of trace time the self time
    that counted, the recent steps and each kept step's self time per (phase, fqn)."""

    def __init__(self, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED):
        self.exclude_steps = exclude_steps
        self.step_ranges = []  # recent (start, end, number), by start
        self.step_self = collections.OrderedDict()  # number -> {(phase, fqn): ns}, kept steps
        self.unassigned = []  # (when, owner, ns) counted before the range of their step was read
        self.window_ns = int(window_s * 1e9)
        self.buckets = collections.OrderedDict()  # second -> {(phase, fqn): ns}
        self.latest_ns = None
        self.first_ns = None
        self.step_ends = collections.deque()  # end times of recent steps
        self.steps = 0
        self.events = 0

    def step_seen(self, start, end, number):
        """A ProfilerStep range was read (number: None when it has no step number)."""
        self.steps += 1
        self.step_ends.append(end)
        if number is not None:
            self.step_range(start, end, number)

    def step_range(self, start, end, number):
        bisect.insort(self.step_ranges, (start, end, number))
        del self.step_ranges[:-2 * RECENT_STEPS]
        if number not in self.exclude_steps:
            self.step_self[number] = {}
            while len(self.step_self) > RECENT_STEPS:
                self.step_self.popitem(last=False)
        waiting, self.unassigned = self.unassigned, []
        for when, owner, ns in waiting:
            self.to_step(when, owner, ns)

    def to_step(self, when, owner, ns):
        """Adds counted time to the step whose range holds `when`; keeps it for later when no
        range read so far reaches that far."""
        k = bisect.bisect_right(self.step_ranges, (when, float("inf"), 0)) - 1
        if k >= 0 and when < self.step_ranges[k][1]:
            per = self.step_self.get(self.step_ranges[k][2])
            if per is not None:  # None: a step left out, or one too old to keep
                per[owner] = per.get(owner, 0) + ns
        elif not self.step_ranges or when >= self.step_ranges[-1][1]:
            self.unassigned.append((when, owner, ns))

    def cpu_read(self, when_ns, fqn, ns):
        """A range's self CPU time (args.self_cpu_ns) starting at when_ns: to its step only."""
        self.to_step(when_ns, (CPU, fqn), ns)

    def counted(self, when_ns, owner, ns):
        """Self time ns of owner (phase, fqn) counted; when_ns: the start of the range that
        held its ops, in their step."""
        self.to_step(when_ns, owner, ns)
        second = when_ns // 1_000_000_000
        bucket = self.buckets.get(second)
        if bucket is None:
            bucket = self.buckets[second] = {}
        bucket[owner] = bucket.get(owner, 0) + ns

    def forget_old(self):
        """Drops the seconds and step ends older than the window."""
        if self.latest_ns is None:
            return
        oldest = (self.latest_ns - self.window_ns) // 1_000_000_000
        for second in list(self.buckets):
            if second < oldest:
                del self.buckets[second]
        while self.step_ends and self.step_ends[0] < self.latest_ns - self.window_ns:
            self.step_ends.popleft()

    def recent(self):
        """{(phase, fqn): ns} over the window."""
        out = {}
        for bucket in self.buckets.values():
            for owner, ns in bucket.items():
                out[owner] = out.get(owner, 0) + ns
        return out

    def step_samples(self):
        """{(phase, fqn): [ns in each of the recent kept steps]} (self time), and how many
        steps; the last step read is left out while later time may still arrive for it."""
        done = list(self.step_self.values())[:-1]
        out = {}
        for k, per in enumerate(done):
            for owner, ns in per.items():
                out.setdefault(owner, [0] * len(done))[k] += ns
        return out, len(done)

    def steps_per_s(self):
        """Steps per second of trace time over the window: intervals between step ends."""
        if len(self.step_ends) < 2:
            return None
        span = self.step_ends[-1] - self.step_ends[0]
        return (len(self.step_ends) - 1) / (span / 1e9) if span > 0 else None


class LiveSummary(summarize.StreamSummary, LiveWindow):
    """StreamSummary that also keeps the LiveWindow (the Python loop: no native engine)."""

    count_outermost_apart = True

    def __init__(self, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED):
        summarize.StreamSummary.__init__(self)
        LiveWindow.__init__(self, window_s, exclude_steps)
        self.totals.step_cpu = self  # _Totals.add_event gives CPU times to add_cpu

    def add_cpu(self, event, start_ns, fqn, phase, ns):
        self.cpu_read(start_ns, fqn, ns)

    def seen(self, e, start, end):
        if self.latest_ns is None or end > self.latest_ns:
            self.latest_ns = end
        if self.first_ns is None or start < self.first_ns:
            self.first_ns = start
        name = e.get("name")
        if type(name) is str and name.startswith(STEP_PREFIX):
            self.step_seen(start, end, step_times.step_number(e))

    def commit(self, owner, group, when_ns):
        super().commit(owner, group, when_ns)
        if group[3] is None:
            return
        ns = sum(t[0] for t in group[2].values())
        if ns:
            self.counted(when_ns, owner, ns)

    def feed(self, events):
        add = self.add
        for e in events:
            add(e)

    def settle(self):
        """After a batch of events: count what nothing can enclose any more, forget old seconds."""
        self.commit_pending(outermost_only=True)
        self.forget_old()

    def module_names(self):
        return self.totals.modules

    def since_start(self):
        out = {}
        for fqn, m in self.totals.modules.items():
            for phase in PHASES:
                ns = m["phases"][phase]["self_ns"]
                if ns:
                    out[(phase, fqn)] = ns
        return out


class NativeLiveSummary(LiveWindow):
    """LiveSummary's numbers from the native engine (summary_engine.h, live mode): it is fed the
    appended event lines as they are and logs, in order, the time it counts and the step ranges
    it reads; each batch's log is replayed here into the LiveWindow."""

    def __init__(self, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED, jsonl=False):
        super().__init__(window_s, exclude_steps)
        self.engine = summarize._native.Engine(jsonl, live=True)
        self._modules = []  # [(fqn, self ns per phase)] as of the last settle()

    def feed_block(self, chunk, start, end):
        """Whole event lines chunk[start:end]: how many events, None when they are not."""
        n = self.engine.feed_block(chunk, start, end)
        if n == -2:
            raise summarize.NotPostOrder(self)
        if n < 0:
            return None
        self._replay()
        return n

    def feed(self, events):
        """Events parsed in Python (lines of another layout): one at a time."""
        for e in events:
            try:
                text = summarize.encode_event(e)
            except (TypeError, ValueError, UnicodeError, OverflowError):
                continue  # not JSON the engine reads (a NaN): no time to count
            if self.engine.feed_event(text) == -2:
                raise summarize.NotPostOrder(self)
        self._replay()

    def _replay(self):
        for kind, phase, text, a, b in self.engine.take_log():
            if kind == 0:  # counted time: (when, ns) of (phase, fqn)
                self.counted(a, (PHASES[phase], text), b)
            elif kind == 2:  # a range's self CPU time: (start, ns) of fqn
                self.cpu_read(a, text, b)
            else:  # a ProfilerStep range: (start, end); phase: its cat is user_annotation
                match = step_times.STEP_NAME.match(text) if phase else None
                self.step_seen(a, b, int(match.group(1)) if match else None)

    def settle(self):
        self.engine.settle()
        self._replay()
        self._modules, self.first_ns, self.latest_ns = self.engine.live_totals()
        self.forget_old()

    def module_names(self):
        return [fqn for fqn, *_ in self._modules]

    def since_start(self):
        out = {}
        for fqn, *per_phase in self._modules:
            for phase, ns in zip(PHASES, per_phase):
                if ns:
                    out[(phase, fqn)] = ns
        return out


def new_live(window_s, exclude_steps, path):
    """The live summary of one file: native when the engine is built."""
    if summarize._native is None:
        return LiveSummary(window_s, exclude_steps)
    jsonl = tracestream.base_name(path).lower().endswith(".jsonl")
    return NativeLiveSummary(window_s, exclude_steps, jsonl)


class Source:
    """One followed file: its Follower, its LiveSummary and what to tell the user about it."""

    def __init__(self, path, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED):
        self.path = path
        self.window_s = window_s
        self.exclude_steps = exclude_steps
        self.follower = follower.Follower(path)
        self.live = new_live(window_s, exclude_steps, path)
        self.message = None

    @property
    def rank(self):
        header = self.follower.header or {}
        info = header.get("distributedInfo")
        return info.get("rank") if isinstance(info, dict) else None

    def poll(self):
        """One read of what was appended; returns the number of events read (None: nothing
        new)."""
        try:
            data, end, restarted = self.follower.read_lines()
        except TraceError as error:
            self.message = str(error) + "; retrying"
            return None
        if restarted:
            self.live = new_live(self.window_s, self.exclude_steps, self.path)
            self.message = (f"{self.path} was replaced (a new run, rotated or truncated): "
                            "reading the new file from its start")
        if isinstance(self.live, NativeLiveSummary):
            events, n = self.follower.poll_events(data, end, self.live.feed_block)
        else:
            events = self.follower.poll_events(data, end, lambda *block: None)[0]
            n = 0
        self.live.feed(events)
        n += len(events)
        self.live.events += n
        if n:
            # Counted after every read (at most MAX_READ), not once per screen: the last
            # outermost range read stays pending until then (each one before it counted when
            # the next came: count_outermost_apart).
            self.live.settle()
        return n if n or restarted else None

    def settle(self):
        self.live.settle()
        if self.follower.state == "waiting":
            self.message = f"waiting for {self.path} to be created (retrying every refresh)"
        elif self.follower.state == "damaged":
            self.message = (f"{self.path}: the compressed data is damaged; showing what was "
                            "read before it (waiting for the file to be replaced)")
        elif self.follower.state == "ended":
            self.message = f"{self.path}: the job has ended (the trace is closed)"
        elif self.message and self.message.startswith("waiting for"):
            self.message = None

    def behind(self):
        """Bytes written but not read yet."""
        try:
            return max(0, os.path.getsize(self.path) - self.follower.offset)
        except OSError:
            return 0

    def dropped(self):
        tail = self.follower.tail
        return tail.get("dropped_events") if isinstance(tail, dict) else None


class Sources:
    """The files to follow; a pattern (`run.*.json`, `{rank}`) picks up files created later."""

    def __init__(self, patterns, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED):
        self.patterns = patterns
        self.window_s = window_s
        self.exclude_steps = exclude_steps
        self.sources = {}
        self.rescan()

    def rescan(self):
        self.unmatched = []
        for pattern in self.patterns:
            if "*" in pattern or "?" in pattern or "{rank}" in pattern or "{pid}" in pattern:
                found = [p for p in glob.glob(pattern.replace("{rank}", "*").replace("{pid}", "*"))
                         if not summarize.is_summary_path(p)]  # a rank's summary is no trace
                if not found:
                    self.unmatched.append(pattern)
                for path in sorted(found):
                    if path not in self.sources:
                        self.sources[path] = Source(path, self.window_s, self.exclude_steps)
            elif pattern not in self.sources:
                self.sources[pattern] = Source(pattern, self.window_s, self.exclude_steps)

    def read(self, budget_s=None):
        """Reads every file round-robin until nothing is new or budget_s seconds are spent
        (then the screen is drawn and reading goes on after it); returns the events read."""
        self.rescan()
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        n = 0
        active = list(self.sources.values())
        while active:
            still = []
            for source in active:
                got = source.poll()
                if got is not None:
                    n += got
                    still.append(source)
            active = still
            if deadline is not None and time.perf_counter() > deadline:
                break
        for source in self.sources.values():
            source.settle()
        return n

    def ordered(self):
        return sorted(self.sources.values(),
                      key=lambda s: (s.rank is None, s.rank if s.rank is not None else 0, s.path))


# ---------------------------------------------------------------------------------------------
# The view's model: a tree of modules with recent and since-start time per phase.


class Row:
    __slots__ = ("fqn", "depth", "children", "recent", "total", "per_rank", "steps")

    def __init__(self, fqn):
        self.fqn = fqn
        self.depth = trace_events.fqn_depth(fqn)
        self.children = []
        self.recent = dict.fromkeys(PHASES, 0)
        self.total = dict.fromkeys(PHASES, 0)
        self.per_rank = {}  # rank label -> recent ns, all phases
        self.steps = {}  # phase -> [subtree ns per recent kept step] (the first file's steps)

    def step_median(self, phase):
        values = self.steps.get(phase)
        return stats.median(values) if values else 0


def build_rows(sources):
    """The module tree over every file: each row holds its subtree's times (ns)."""
    rows = {}
    roots = []

    def row(fqn):
        r = rows.get(fqn)
        if r is None:
            r = rows[fqn] = Row(fqn)
            parts = [fqn] if fqn == "Global" else fqn.split(".")
            if len(parts) == 1:
                roots.append(r)
            else:
                row(".".join(parts[:-1])).children.append(r)
        return r

    for index, source in enumerate(sources):
        label = f"r{source.rank}" if source.rank is not None else f"f{index}"
        live = source.live
        for fqn in live.module_names():
            row(fqn)
        for (phase, fqn), ns in live.recent().items():
            for r in _chain(row, fqn):
                r.recent[phase] += ns
                r.per_rank[label] = r.per_rank.get(label, 0) + ns
        for (phase, fqn), ns in live.since_start().items():
            for r in _chain(row, fqn):
                r.total[phase] += ns
        if index == 0:  # per-step medians of one process (ranks' steps do not line up)
            per, n = live.step_samples()
            for (phase, fqn), values in per.items():
                for r in _chain(row, fqn):
                    mine = r.steps.setdefault(phase, [0] * n)
                    for k, ns in enumerate(values):
                        mine[k] += ns
    roots.sort(key=lambda r: r.fqn == "Global")
    return roots


def _chain(row, fqn):
    """The row of fqn and of every module above it."""
    if fqn == "Global":
        return [row(fqn)]
    parts = fqn.split(".")
    return [row(".".join(parts[:k])) for k in range(1, len(parts) + 1)]


class View:
    """What the user steers: order, selection, collapsed modules."""

    def __init__(self, depth=None):
        self.sort = "tree"
        self.selected = 0
        self.collapsed = set()
        self.expand_depth = depth  # collapse deeper modules the first time they are seen
        self.seen = set()
        self.quit = False

    def visible(self, roots):
        out = []

        def key(r):
            if self.sort == "recent":
                return -sum(r.recent.values())
            if self.sort == "total":
                return -sum(r.total.values())
            return 0

        def walk(nodes):
            for r in sorted(nodes, key=key) if self.sort != "tree" else nodes:
                if r.fqn not in self.seen:
                    self.seen.add(r.fqn)
                    if self.expand_depth is not None and r.depth >= self.expand_depth \
                            and r.children:
                        self.collapsed.add(r.fqn)
                out.append(r)
                if r.fqn not in self.collapsed:
                    walk(r.children)

        walk(roots)
        return out

    def key(self, k, rows):
        if k in ("q", "Q", "\x03"):
            self.quit = True
        elif k == "s":
            self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        elif k in ("\x1b[A", "k"):
            self.selected = max(0, self.selected - 1)
        elif k in ("\x1b[B", "j"):
            self.selected = min(max(0, len(rows) - 1), self.selected + 1)
        elif k in ("\r", "\n", " ") and rows:
            fqn = rows[min(self.selected, len(rows) - 1)].fqn
            if fqn in self.collapsed:
                self.collapsed.discard(fqn)
            else:
                self.collapsed.add(fqn)
        elif k == "+":
            self.collapsed.clear()
        elif k == "-":
            self.collapsed = {r.fqn for r in rows if r.children}


# ---------------------------------------------------------------------------------------------
# Drawing (rich)


def _ms(ns):
    if not ns:
        return "-"
    ms = ns / 1e6
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.1f}" if ms >= 100 else f"{ms:.2f}"


def render(sources, view, window_s, rate, width=None):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    ordered = sources.ordered()
    roots = build_rows(ordered)
    rows = view.visible(roots)
    if rows:
        view.selected = min(view.selected, len(rows) - 1)
    labels = []
    for index, s in enumerate(ordered):
        labels.append(f"r{s.rank}" if s.rank is not None else f"f{index}")
    ranked = [(lab, s) for lab, s in zip(labels, ordered) if s.follower.header is not None]
    per_rank = 1 < len(ranked) <= 8
    events = sum(s.live.events for s in ordered)
    trace_s = max(((s.live.latest_ns or 0) - (s.live.first_ns or 0)) / 1e9 for s in ordered) \
        if ordered else 0
    steps = [s.live.steps_per_s() for s in ordered]
    steps_text = "-"
    if any(v is not None for v in steps):
        steps_text = " ".join(f"{lab} {v:.2f}" if len(ordered) > 1 else f"{v:.2f}"
                              for lab, v in zip(labels, steps) if v is not None)
    behind = sum(s.behind() for s in ordered)
    dropped = [s.dropped() for s in ordered]
    dropped_text = ("?" if not dropped or any(d is None for d in dropped)
                    else str(sum(d for d in dropped if isinstance(d, int))))
    title = Text()
    title.append("fqntrace top", style="bold")
    files = f"  {len(ordered)} files" if len(ordered) != 1 else ""
    title.append(f"{files}  trace {trace_s:.1f} s  last {window_s:g} s  steps/s {steps_text}  "
                 f"{events:,} events ({rate:,.0f}/s)  "
                 + (f"dropped {dropped_text}  " if dropped_text != "?" else "")
                 + f"sort {view.sort}")
    notes = [Text(s.message, style="yellow") for s in ordered if s.message]
    notes += [Text(f"waiting for files matching {p} (retrying every refresh)", style="yellow")
              for p in sources.unmatched]
    if behind > 1 << 20:
        notes.append(Text(f"reading {behind / (1 << 20):.0f} MiB behind the writer (the job "
                          "writes events faster than this view reads them)", style="yellow"))
    sampled = [s for s in ordered if sampled_trace.sample_of(s.follower.header) is not None]
    if sampled:
        notes.append(Text(f"{len(sampled)} of the traces are sampled (FQNTRACE_SAMPLE): top counts "
                          "the ops they hold, a fraction of the job's; `python -m fqntrace summary` "
                          "gives their module times", style="yellow"))
    bad = sum(s.follower.bad_lines for s in ordered)
    if bad:
        notes.append(Text(f"{bad} lines were not valid JSON and were skipped", style="yellow"))

    # recompute only when there is any (activation checkpointing)
    phases = [p for p in PHASES if p != "recompute" or any(r.total[p] for r in roots)]
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False, header_style="bold")
    table.add_column("module", no_wrap=True, overflow="ellipsis", max_width=40)
    for p in phases:
        table.add_column(PHASE_SHORT[p], justify="right", no_wrap=True)
    table.add_column("%", justify="right", no_wrap=True)
    for p in phases:
        table.add_column("\u03a3" + PHASE_SHORT[p], justify="right", no_wrap=True)
    with_steps = any(r.steps for r in roots)
    with_cpu = any(r.steps.get(CPU) for r in roots)
    if with_steps:
        for p in phases:
            table.add_column(PHASE_SHORT[p] + "/st", justify="right", no_wrap=True)
    if with_cpu:
        table.add_column("cpu/st", justify="right", no_wrap=True)
    if per_rank:
        for lab, _ in ranked:
            table.add_column(lab, justify="right", no_wrap=True)
    recent_all = sum(sum(r.recent.values()) for r in roots)
    for i, r in enumerate(rows):
        mark = ("- " if r.fqn not in view.collapsed else "+ ") if r.children else "  "
        name = "  " * min(r.depth, 12) + mark + (r.fqn if r.depth == 0 or r.fqn == "Global"
                                                 else r.fqn.rsplit(".", 1)[-1])
        share = sum(r.recent.values()) / recent_all * 100 if recent_all else 0
        # A Text, not a str: rich would read a name's "[...]" as markup.
        cells = [Text(trace_events.printable(name))] + [_ms(r.recent[p]) for p in phases]
        cells.append(f"{share:.1f}" if share else "-")
        cells += [_ms(r.total[p]) for p in phases]
        if with_steps:
            cells += [_ms(r.step_median(p)) for p in phases]
        if with_cpu:
            cells.append(_ms(r.step_median(CPU)))
        if per_rank:
            cells += [_ms(r.per_rank.get(lab, 0)) for lab, _ in ranked]
        table.add_row(*cells, style="reverse" if i == view.selected else None)
    legend = Text(f"ms of op time of the module and its submodules over the last {window_s:g} s "
                  "of trace time (%: share" + (", rN: per rank" if per_rank else "") +
                  "); \u03a3: since the start" + (
                      "; /st: median per step over the last steps, "
                      + _left_out(ordered[0].exclude_steps) if with_steps else "") +
                  ("; cpu/st: the thread's CPU time, all phases" if with_cpu else "") +
                  ".  keys: q quit, s sort, \u2191/\u2193 move, "
                  "Enter expand/collapse, +/- all", style="dim")
    parts = [title] + notes + [table if rows else Text("(no module time yet)"), legend]
    return Group(*parts), rows


def _left_out(exclude):
    return ("step " + ", ".join(str(s) for s in sorted(exclude)[:5]) + " left out") if exclude \
        else "no step left out"


class _Keys:
    """The terminal's keys without echo or line buffering (cbreak), restored on exit."""

    def __init__(self):
        self.fd = None
        self.saved = None

    def __enter__(self):
        if sys.stdin.isatty():
            import termios
            import tty

            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def wait(self, timeout):
        """The keys pressed within timeout seconds (returns at the first one)."""
        if self.fd is None:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 64).decode("utf-8", errors="replace")
        keys = []
        i = 0
        while i < len(data):
            if data[i] == "\x1b" and data[i + 1:i + 2] == "[" and i + 2 < len(data):
                keys.append(data[i:i + 3])
                i += 3
            else:
                keys.append(data[i])
                i += 1
        return keys


def main(args):
    try:
        import rich  # noqa: F401
    except ImportError:
        sys.stderr.write("fqntrace: " + INSTALL_HINT + "\n")
        return 1
    from rich.console import Console
    from rich.live import Live

    sources = Sources(args.traces, args.window,
                      getattr(args, "exclude_steps", step_times.DEFAULT_EXCLUDED))
    view = View(args.depth)
    console = Console()
    if args.once:
        started = time.perf_counter()
        n = 0
        while True:
            got = sources.read(budget_s=1.0)
            n += got
            if not got:
                break
        elapsed = max(time.perf_counter() - started, 1e-9)
        screen, _ = render(sources, view, args.window, n / elapsed)
        console.print(screen)
        return 0
    with _Keys() as keys, Live(console=console, auto_refresh=False, screen=False,
                               transient=False) as live:
        rate = 0.0
        while not view.quit:
            started = time.perf_counter()
            n = sources.read(budget_s=READ_SHARE * args.interval)
            spent = time.perf_counter() - started
            rate = n / spent if n and spent > 0 else rate
            screen, rows = render(sources, view, args.window, rate)
            live.update(screen, refresh=True)
            deadline = started + args.interval
            while not view.quit:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                pressed = keys.wait(left)
                for k in pressed:
                    view.key(k, rows)
                if pressed:
                    screen, rows = render(sources, view, args.window, rate)
                    live.update(screen, refresh=True)
    for s in sources.sources.values():
        s.follower.close()
    return 0
