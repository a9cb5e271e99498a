"""The native summary engine's data, both ways (fqntrace.analysis._native_summary): the JSON
text of an event it reads, pids keyed as it keys them, its sums turned into the Totals a summary
is made of, and the exception for an event it cannot take. summarize.py runs the engine.
"""

import json

from fqntrace.analysis import memory
from fqntrace.analysis.summary_totals import Totals
from fqntrace.analysis.trace_events import PHASES


class _NativeCannot(Exception):
    """An event the native engine cannot take: the Python loop reads the file instead."""


def _dict_key(value):
    """A pid as the engine keys it (as a Python dict would: 1, 1.0 and True are one key)."""
    if isinstance(value, str):
        return "s" + value
    if value is None:
        return "n"
    if isinstance(value, bool):
        return "i1" if value else "i0"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"i{int(value)}" if value.is_integer() and abs(value) < 9e15 else f"f{value!r}"
    return "o"


class _NativeMemory(memory.MemoryStats):
    """The engine's memory numbers, finished (its runs closed, its live gradients counted)."""

    def finish(self):
        pass


def _flat_ranges(ranges):
    return [
        (_dict_key(pid), start, end, step)
        for pid, rs in (ranges or {}).items()
        for start, end, step in rs
    ]


def _totals_from(sums):
    totals = Totals()
    for fqn, module_type, calls, first_seen, phases in sums["modules"]:
        totals.first_seen[fqn] = first_seen
        totals.modules[fqn] = {
            "module_type": module_type,
            "calls": calls,
            "phases": {
                phase: {
                    "self_ns": r[0],
                    "self_ops": r[1],
                    "self_flops": r[2],
                    "comm_ns": r[3],
                    "comm_bytes": r[4],
                    "collectives": r[5],
                    "device_ns": r[6],
                    "top": r[7],
                    "cpu_ns": r[8],
                }
                for phase, r in zip(PHASES, phases)
            },
        }
    totals.device_seen = sums["device_seen"]
    totals.cpu_seen = sums["cpu_seen"]
    totals.declared_types = sums["declared_types"]
    mem = totals.memory = _NativeMemory()
    mem.seen = sums["memory_seen"]
    for fqn, numbers, live_grad in sums["memory_nodes"]:
        node = mem.nodes[fqn] = {
            phase: dict(zip(memory.FIELDS, row)) for phase, row in zip(PHASES, numbers)
        }
        if live_grad:
            mem.live_grad[id(node)] = live_grad
    return totals


try:
    from msgspec.json import encode as encode_event
except ImportError:  # pragma: no cover - the standard library's encoder

    def encode_event(e):
        """An event as the JSON text the native engine reads."""
        return json.dumps(e, allow_nan=False).encode()
