"""`python -m fqntrace summary TRACE TRACE...`: the ranks of one job side by side.

Each rank's trace is summarized as a stream (summarize.py, memory bounded by its modules),
the files in parallel in a process pool; then, per module and phase, the ranks' op times give
the median, the maximum and the slowest rank, and the communication time (collectives' backend
work) of the module on every rank is listed.

The *straggler* is the module, phase and rank whose own op time (self time, not its
submodules') exceeds that module's median across ranks the most: a rank that does extra work
inside one module makes every enclosing module slower too, but only that module's self time.

With ``--scheduler ADDRESS`` the files are summarized on a Dask cluster instead of the local pool
(summarize_on_cluster: each file by a worker that sees it, so the traces are read where they
are; only the summaries, a few hundred kB each, travel), then reduced here the same way.
"""

import concurrent.futures
import gc
import glob
import os
import statistics

from fqntrace.analysis import summarize, trace_events
from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import PHASES


def expand_paths(patterns):
    """Paths from the command line: a pattern that names no file (quoted `run.*.json`, or the
    FQNTRACE value with `{rank}`) is expanded as a glob; results are sorted, duplicates dropped."""
    paths = []
    for pattern in patterns:
        if os.path.exists(pattern):
            found = [pattern]
        else:
            found = sorted(glob.glob(pattern.replace("{rank}", "*").replace("{pid}", "*")))
            if not found:
                raise TraceError(f"{pattern}: no such file (and no file matches it as a pattern)")
            traces = [p for p in found if not summarize.is_summary_path(p)]
            if traces:  # run.*.json also matches run.0.summary.json, the same rank again
                found = traces
        for path in found:
            if path not in paths:
                paths.append(path)
    return paths


def _matches(pattern):
    """The files a pattern names (expand_paths' rule), [] when none."""
    if os.path.exists(pattern):
        return [pattern]
    found = sorted(glob.glob(pattern.replace("{rank}", "*").replace("{pid}", "*")))
    traces = [p for p in found if not summarize.is_summary_path(p)]
    return traces or found


def across_ranks(paths, jobs=None, note=lambda message: None):
    """The cross-rank summary of these files, read here by up to `jobs` processes."""
    return cross_rank(paths, summarize_files(paths, jobs=jobs, note=note), note=note)


def across_ranks_on_cluster(patterns, address, note=lambda message: None):
    """The cross-rank summary of the files the patterns name on the Dask cluster at `address`
    (summarize_on_cluster)."""
    paths, summaries = summarize_on_cluster(patterns, address, note=note)
    return cross_rank(paths, summaries, note=note)


def _summarize_one(path):
    """In a worker process: (summary, notes) or (None, error message)."""
    notes = []
    gc.disable()  # as the CLI does: no cycles to collect while reading (a Dask worker too)
    try:
        return summarize.load_for_summary(path, note=notes.append), notes
    except TraceError as error:
        return None, [str(error)]
    except MemoryError:
        return None, [f"{path}: out of memory while reading the trace"]
    finally:
        gc.enable()


def summarize_files(paths, jobs=None, note=lambda message: None):
    """Every file's summary, in the order given, read by up to `jobs` processes."""
    if jobs is None:
        jobs = os.cpu_count() or 1
    jobs = max(1, min(jobs, len(paths)))
    if jobs == 1:
        results = [_summarize_one(p) for p in paths]
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_summarize_one, paths))
    return _collect(paths, results, note)


DASK_HINT = (
    "summary --scheduler needs Dask's distributed scheduler: pip install "
    "'fqntrace[dask]' (on this machine and on every worker)"
)


def _files_seen(patterns):
    """On a Dask worker: per pattern, the files it names here, as (path, size, mtime_ns)."""
    out = []
    for pattern in patterns:
        files = []
        for path in _matches(pattern):
            try:
                st = os.stat(path)
            except OSError:
                continue
            files.append((path, st.st_size, st.st_mtime_ns))
        out.append(files)
    return out


def summarize_on_cluster(patterns, address, note=lambda message: None):
    """(paths, summaries): the files the patterns name on the workers of the Dask cluster at
    `address`, each summarized by a worker that sees it (where the file is: a worker on each
    node with traces). Patterns are expanded on the workers, as they would be locally; a file
    several workers see (a shared file system: same size and time) is read once."""
    try:
        from distributed import Client
    except ImportError:
        raise TraceError(DASK_HINT) from None
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError, ValueError) as error:
        raise TraceError(
            f"cannot reach the Dask scheduler at {address} ({error}); start one "
            "with `dask scheduler` and a worker next to the traces with `dask worker "
            f"{address}`"
        ) from None
    with client:
        seen = client.run(_files_seen, list(patterns))  # {worker: per pattern [(path, ...)]}
        if not seen:
            raise TraceError(
                f"the Dask cluster at {address} has no workers; start one next to "
                f"the traces: dask worker {address}"
            )
        hosts = {
            w: info.get("host", w) for w, info in client.scheduler_info().get("workers", {}).items()
        }
        paths, jobs, done = [], [], set()
        for k, pattern in enumerate(patterns):
            where = {}  # (path, size, mtime) -> the workers that see that file
            for worker, per_pattern in sorted(seen.items()):
                for item in per_pattern[k]:
                    where.setdefault(tuple(item), []).append(worker)
            if not where:
                raise TraceError(
                    f"{pattern}: no worker of the Dask cluster at {address} sees "
                    "a file that matches; start a worker on the node that holds "
                    f"the traces: dask worker {address}"
                )
            for item in sorted(where):
                if item in done:
                    continue  # named by an earlier pattern too
                done.add(item)
                twins = sum(1 for other in where if other[0] == item[0])
                # One name, different files (node-local disks): say on which host.
                paths.append(item[0] if twins == 1 else f"{hosts.get(where[item][0])}:{item[0]}")
                jobs.append((item[0], where[item]))
        load = {}
        futures = []
        for path, candidates in jobs:
            worker = min(candidates, key=lambda w: (load.get(w, 0), w))  # spread the files
            load[worker] = load.get(worker, 0) + 1
            futures.append(
                client.submit(
                    _summarize_one, path, workers=[worker], allow_other_workers=False, pure=False
                )
            )
        results = client.gather(futures)
    return paths, _collect(paths, results, note)


def _collect(paths, results, note):
    """The summaries of (summary, notes) results; the first failure as a TraceError."""
    summaries = []
    said = set()  # each worker may say the same (no native summary there): once
    for path, (summary, messages) in zip(paths, results):
        if summary is None:
            raise TraceError(messages[0])
        for message in messages:
            if message not in said:
                said.add(message)
                note(message)
        summaries.append(summary)
    return summaries


def _rank_ids(paths, summaries, note):
    """The rank of each file: its header's, or its position when ranks are missing or repeat."""
    ranks = [s.get("rank") for s in summaries]
    if all(isinstance(r, int) for r in ranks) and len(set(ranks)) == len(ranks):
        return ranks
    note(
        "the traces do not name distinct ranks (distributedInfo.rank); numbering them 0.."
        f"{len(paths) - 1} in the order given"
    )
    return list(range(len(paths)))


def _spread(values_by_rank):
    """median, max, min and the slowest rank (the lowest rank number among equals)."""
    values = list(values_by_rank.values())
    slowest = min(values_by_rank, key=lambda r: (-values_by_rank[r], r))
    return statistics.median(values), values_by_rank[slowest], min(values), slowest


def _ms(value):
    return round(value, 6)


def cross_rank(paths, summaries, note=lambda message: None):
    """The cross-rank summary (the JSON shape of `summary --json` over several traces)."""
    ranks = _rank_ids(paths, summaries, note)
    order = sorted(range(len(ranks)), key=lambda i: ranks[i])
    by_rank = {ranks[i]: summaries[i] for i in order}
    fqns = []
    seen = set()
    for i in order:
        for fqn in summaries[i]["modules"]:
            if fqn not in seen:
                seen.add(fqn)
                fqns.append(fqn)

    def phase_of(summary, fqn, phase):
        entry = summary["modules"].get(fqn)
        p = entry.get(phase) if isinstance(entry, dict) else None
        return p if isinstance(p, dict) else {}

    def number(p, field):
        value = p.get(field, 0)
        return value if trace_events.is_number(value) else 0

    modules = {}
    straggler = None
    for fqn in fqns:
        entry = {
            "module_type": next(
                (
                    s["modules"][fqn].get("module_type")
                    for s in by_rank.values()
                    if fqn in s["modules"] and s["modules"][fqn].get("module_type")
                ),
                "",
            ),
            "calls": {
                str(r): (s["modules"].get(fqn) or {}).get("calls", 0) for r, s in by_rank.items()
            },
        }
        for phase in PHASES:
            per_rank = {}
            for r, s in by_rank.items():
                p = phase_of(s, fqn, phase)
                per_rank[r] = {
                    "total_ms": number(p, "total_ms"),
                    "self_ms": number(p, "self_ms"),
                    "comm_ms": number(p, "comm_ms"),
                    "collectives": number(p, "collectives"),
                }
            median, top, low, slowest = _spread({r: v["total_ms"] for r, v in per_rank.items()})
            s_median, s_top, _, s_slowest = _spread({r: v["self_ms"] for r, v in per_rank.items()})
            entry[phase] = {
                "median_ms": _ms(median),
                "max_ms": _ms(top),
                "min_ms": _ms(low),
                "slowest_rank": slowest,
                "over_median_ms": _ms(top - median),
                "self_median_ms": _ms(s_median),
                "self_max_ms": _ms(s_top),
                "self_slowest_rank": s_slowest,
                "comm_ms": {str(r): v["comm_ms"] for r, v in per_rank.items()},
                "ranks": {str(r): v for r, v in per_rank.items()},
            }
            gap = s_top - s_median
            if gap > 0 and (straggler is None or gap > straggler["over_median_ms"]):
                straggler = {
                    "module": fqn,
                    "phase": phase,
                    "rank": s_slowest,
                    "over_median_ms": _ms(gap),
                    "self_ms": _ms(s_top),
                    "median_self_ms": _ms(s_median),
                }
        modules[fqn] = entry
    steps = {
        r: s.get("step_ms", 0) if trace_events.is_number(s.get("step_ms")) else 0
        for r, s in by_rank.items()
    }
    median, top, low, slowest = _spread(steps)
    result = {
        "ranks": [ranks[i] for i in order],
        "traces": {str(ranks[i]): paths[i] for i in order},
        "step_ms": {
            "median_ms": _ms(median),
            "max_ms": _ms(top),
            "min_ms": _ms(low),
            "slowest_rank": slowest,
            "ranks": {str(r): v for r, v in steps.items()},
        },
        "complete": all(s.get("complete") is not False for s in summaries),
        "dropped_events": {str(r): s.get("dropped_events", 0) for r, s in by_rank.items()},
        "straggler": straggler,
        "modules": modules,
    }
    devices = {str(r): s["device"] for r, s in by_rank.items() if isinstance(s.get("device"), dict)}
    if devices:  # what each rank's trace says of its GPU (the table's host-time note)
        result["device"] = devices
    return result
