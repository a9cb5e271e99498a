"""The files top follows: one Source per file (its Follower and live summary), and Sources, the
patterns that pick up files created later."""

import glob
import os
import time

from fqntrace.analysis import follower, step_times, summarize, trace_events
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.top.live import NativeLiveSummary, new_live
from fqntrace.analysis.trace_format import JSONL


class Source:
    """One followed file: its Follower, its LiveSummary and what to tell the user about it."""

    def __init__(self, path, window_s, exclude_steps=step_times.DEFAULT_EXCLUDED):
        self.path = path
        self.window_s = window_s
        self.exclude_steps = exclude_steps
        self.follower = follower.Follower(path)
        self.live = new_live(window_s, exclude_steps, self.follower.format == JSONL)
        self.message = None

    @property
    def rank(self):
        return trace_events.rank_of(self.follower.header or {})

    def poll(self):
        """One read of what was appended; returns the number of events read (None: nothing
        new)."""
        try:
            data, end, restarted = self.follower.read_lines()
        except TraceError as error:
            self.message = str(error) + "; retrying"
            return None
        if restarted:
            self.live = new_live(self.window_s, self.exclude_steps, self.follower.format == JSONL)
            self.message = (
                f"{self.path} was replaced (a new run, rotated or truncated): "
                "reading the new file from its start"
            )
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
            self.message = (
                f"{self.path}: the compressed data is damaged; showing what was "
                "read before it (waiting for the file to be replaced)"
            )
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
                found = [
                    p
                    for p in glob.glob(pattern.replace("{rank}", "*").replace("{pid}", "*"))
                    if not summarize.is_summary_path(p)
                ]  # a rank's summary is no trace
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
        return sorted(
            self.sources.values(),
            key=lambda s: (s.rank is None, s.rank if s.rank is not None else 0, s.path),
        )
