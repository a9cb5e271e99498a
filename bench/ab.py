"""The A/B harness every in-process comparison uses: blocks of steps alternate between arm A
(the reference) and arm B (the change measured) in the order A B B A A B B A ..., so both arms
share the machine's noise of the moment and a drift within a group of four cancels. Each group
of four gives one comparison of its own, the most local one there is; and the two A blocks of a
group give the A/B's own noise (A against A).

    blocks = ab.run(16, lambda b: ab.timed(step, 20))  # [(b, [ms, ...]), ...]
    a, b = ab.arms(blocks)
    changes = ab.group_changes(blocks)                 # % per group of four
"""

import statistics
import time


def run(blocks, block):
    """Calls block(b) for each of `blocks` blocks, b True for arm B (blocks 1 and 2 of every four);
    returns [(b, what block returned)]."""
    return [(i % 4 in (1, 2), block(i % 4 in (1, 2))) for i in range(blocks)]


def timed(step, n):
    """ms of each of n calls of step()."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        step()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def arms(blocks):
    """(arm A's values, arm B's values), the blocks' lists joined."""
    return (
        [v for b, values in blocks if not b for v in values],
        [v for b, values in blocks if b for v in values],
    )


def change_pct(a, b, stat=statistics.median):
    return 100.0 * (stat(b) / stat(a) - 1.0)


def group_changes(blocks, stat=statistics.fmean):
    """B against A in % within each whole group of four blocks."""
    return [change_pct(*arms(blocks[g : g + 4]), stat) for g in range(0, len(blocks) - 3, 4)]


def null_changes(blocks, stat=statistics.fmean):
    """The last A block of each group of four against its first, in %: the A/B's own noise."""
    return [change_pct(blocks[g][1], blocks[g + 3][1], stat) for g in range(0, len(blocks) - 3, 4)]


def traced_blocks(step, blocks, steps, path, after_traced=lambda: None):
    """run() of untraced blocks (A) against blocks traced by fqntrace.profile(path) (B), `steps`
    timed steps each (after one untimed). Between traced blocks the module hooks are removed, so
    untraced blocks run with torch's own nn.Module.__call__ (the parameter hooks stay: one no-op
    Python call per parameter per backward). after_traced(): called after each traced block."""
    import fqntrace
    import fqntrace._hooks

    with fqntrace.profile(path):  # names the modules and hooks the parameters once
        step()
    fqntrace._hooks.uninstall()

    def block(traced):
        if not traced:
            step()
            return timed(step, steps)
        with fqntrace.profile(path):
            step()  # settle: the session's first step allocates its buffers
            times = timed(step, steps)
        fqntrace._hooks.uninstall()
        after_traced()
        return times

    return run(blocks, block)
