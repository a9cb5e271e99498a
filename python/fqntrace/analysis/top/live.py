"""top's live accounting: per file, the summary's time as it is counted, kept per second of trace
time (the recent window) and per recent step, by the native engine (NativeLiveSummary) or the
Python loop (LiveSummary)."""

import bisect
import collections

from fqntrace.analysis import step_times, summarize, summarize_native
from fqntrace.analysis.trace_events import PHASES

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
        del self.step_ranges[: -2 * RECENT_STEPS]
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
        self.totals.step_cpu = self  # summary_totals.Totals.add_event gives CPU times to add_cpu

    def add_cpu(self, event, start_ns, fqn, phase, ns):
        self.cpu_read(start_ns, fqn, ns)

    def seen(self, e, start, end):
        if self.latest_ns is None or end > self.latest_ns:
            self.latest_ns = end
        if self.first_ns is None or start < self.first_ns:
            self.first_ns = start
        name = e.get("name")
        if type(name) is str and name.startswith(step_times.STEP_PREFIX):
            self.step_seen(start, end, step_times.step_number(e))

    def commit(self, owner, group, when_ns):
        super().commit(owner, group, when_ns)
        if group.phase_totals is None:
            return
        ns = sum(t[0] for t in group.contributions.values())
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

    def device_since_start(self):
        """{fqn: device ns its ops launched, all phases} (FQNTRACE_DEVICE, annotated traces)."""
        out = {}
        for fqn, m in self.totals.modules.items():
            ns = sum(m["phases"][phase]["device_ns"] for phase in PHASES)
            if ns:
                out[fqn] = ns
        return out


class NativeLiveSummary(LiveWindow):
    """LiveSummary's numbers from the native engine (summary_engine.h, live mode): it is fed the
    appended event lines as they are and logs, in order, the time it counts and the step ranges
    it reads; each batch's log is replayed here into the LiveWindow."""

    def __init__(self, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED, jsonl=False):
        super().__init__(window_s, exclude_steps)
        self.engine = summarize._native.Engine(jsonl, live=True)
        self._modules = []  # [(fqn, self ns per phase, device ns)] as of the last settle()

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
                text = summarize_native.encode_event(e)
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
                self.step_seen(a, b, step_times.number_in_name(text) if phase else None)

    def settle(self):
        self.engine.settle()
        self._replay()
        self._modules, self.first_ns, self.latest_ns = self.engine.live_totals()
        self.forget_old()

    def module_names(self):
        return [fqn for fqn, *_ in self._modules]

    def since_start(self):
        out = {}
        for fqn, *per_phase, _ in self._modules:
            for phase, ns in zip(PHASES, per_phase):
                if ns:
                    out[(phase, fqn)] = ns
        return out

    def device_since_start(self):
        """{fqn: device ns its ops launched, all phases} (FQNTRACE_DEVICE, annotated traces)."""
        return {fqn: row[-1] for fqn, *row in self._modules if row[-1]}


def new_live(window_s, exclude_steps, jsonl):
    """The live summary of one file (`jsonl`: in JSON Lines): native when the engine is built."""
    if summarize._native is None:
        return LiveSummary(window_s, exclude_steps)
    return NativeLiveSummary(window_s, exclude_steps, jsonl)
