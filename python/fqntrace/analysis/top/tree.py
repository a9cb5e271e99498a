"""The view's model: a tree of modules with recent and since-start time per phase over every
file, and what the user steers (order, selection, collapsed modules)."""

from fqntrace.analysis import stats, trace_events
from fqntrace.analysis.trace_events import PHASES

SORTS = ("tree", "recent", "total")


class Row:
    __slots__ = ("fqn", "depth", "children", "recent", "total", "device", "per_rank", "steps")

    def __init__(self, fqn):
        self.fqn = fqn
        self.depth = trace_events.fqn_depth(fqn)
        self.children = []
        self.recent = dict.fromkeys(PHASES, 0)
        self.total = dict.fromkeys(PHASES, 0)
        self.device = 0  # device ns since the start, all phases
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
            above = trace_events.ancestors(fqn)
            if above:
                row(above[-1]).children.append(r)
            else:
                roots.append(r)
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
        for fqn, ns in live.device_since_start().items():
            for r in _chain(row, fqn):
                r.device += ns
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
    return [row(f) for f in trace_events.lineage(fqn)]


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
                    if (
                        self.expand_depth is not None
                        and r.depth >= self.expand_depth
                        and r.children
                    ):
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
