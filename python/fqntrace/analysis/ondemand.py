"""`python -m fqntrace capture`: ask the armed processes of a job to record the same next steps
(docs/on-demand.md).

The targets are the live status records a pattern, folder or pid names (ondemand_status). The
first step is the next one every target can still reach once it has seen the request: each
record's step, moved on by its rate for the time since it was written and for the time the
process takes to see a request (at once with inotify on this host, else its next poll), then
rounded up to a multiple of --roundup. The request is written beside the records, aside and
renamed into place; then the records are polled until every target has finished its capture,
refused, died, or the timeout passed.
"""

import glob
import json
import math
import os
import socket
import time
import uuid

from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.ondemand_status import (
    FINISHED,
    HINT,
    REQUEST_NAME,
    STATUS_SUFFIX,
    by_rank,
    load_json,
    locate,
    none_found,
    read_status,
    readable,
)
from fqntrace.analysis.trace_events import is_number, printable

NOTIFY_DELAY_S = 0.5  # a process watching its folder with inotify, on this host, sees it in this
POLL_DELAY_S = 1.25  # otherwise: the processes poll once a second
POLL_S = 0.1  # how often the records are read while waiting
READS_PER_S = 2000  # ... at most: with 10,000 targets, a round every 5 s
MIN_TIMEOUT_S = 60.0
TIMEOUT_MARGIN_S = 30.0


def live_targets(where, note):
    """The records ``where`` names whose processes are alive, by rank; a note for each stale
    or unreadable one; TraceError when none is left."""
    statuses, searched = locate(where)
    if not statuses:
        raise none_found(searched)
    now = time.time()
    live = []
    for status in by_rank(readable(statuses, note)):
        stale = status.staleness(now)
        if stale:
            note(f"skipped {status.who()}: {stale}")
        else:
            live.append(status)
    if not live:
        raise TraceError(
            f"no live process to capture {searched}: every record is stale or unreadable; {HINT}"
        )
    return live


def _finished(status, request_id):
    answer = status.answer(request_id)
    if answer is not None and answer.get("answer") == "refused":
        return True
    entry = status.capture(request_id)
    return entry is not None and entry.get("state") in FINISHED


def request_in_progress(folder, now):
    """Why the request in the folder still runs (in words), or None: none there, expired, or
    every target that is still alive has answered and finished."""
    try:
        request = load_json(os.path.join(folder, REQUEST_NAME))
    except (OSError, ValueError):
        return None
    if not isinstance(request, dict) or request.get("fqntrace_request") != 1:
        return None
    expires = request.get("expires")
    if not is_number(expires) or expires <= now:
        return None
    request_id = request.get("id")
    statuses = [
        read_status(p) for p in glob.glob(os.path.join(glob.escape(folder), "*" + STATUS_SUFFIX))
    ]
    by_key = {s.key(): s for s in statuses if s.error is None}
    waiting = []
    for target in request.get("targets") or []:
        if not isinstance(target, dict):
            continue
        status = by_key.get((str(target.get("host", "")), target.get("pid")))
        # A target whose record is gone or stale will never answer: it holds nothing up.
        if status is not None and not status.staleness(now) and not _finished(status, request_id):
            waiting.append(status)
    if not waiting:
        return None
    more = f" and {len(waiting) - 1} more" if len(waiting) > 1 else ""
    return (
        f"{printable(os.path.join(folder, REQUEST_NAME))} holds request "
        f"{printable(request_id)}, which {waiting[0].who()}{more} has not finished (it "
        f"expires in {expires - now:.0f} s); wait for it to end"
    )


def check_free(targets, now):
    """TraceError when a target is recording already or a request in its folder still runs."""
    for status in targets:
        busy = status.busy()
        if busy:
            raise TraceError(
                f"{status.who()} is capturing already ({busy}); wait until it is "
                "done (python -m fqntrace ps)"
            )
    for folder in sorted({os.path.dirname(s.path) for s in targets}):
        why = request_in_progress(folder, now)
        if why:
            raise TraceError(why)


def see_delay(targets):
    """Seconds until every target has seen a request written now."""
    host = socket.gethostname()
    if all(s.host == host and s.data.get("notify") is True for s in targets):
        return NOTIFY_DELAY_S
    return POLL_DELAY_S


def _current_step(status, now):
    """Where the process is now, by its record's step and rate."""
    return status.step + status.rate * max(0.0, now - status.updated)


def first_step(targets, now, delay, roundup=1):
    """The first multiple of roundup every target is still before once it has seen the
    request: after ceil(its step now + its rate x delay)."""
    need = max(math.ceil(_current_step(s, now) + s.rate * delay) + 1 for s in targets)
    return -(-need // roundup) * roundup


def default_timeout(targets, now, delay, at_step, steps, seconds):
    """30 s more than reaching and recording the steps should take at the targets' rates (and
    the seconds), 60 s at least."""
    expected = delay + (seconds or 0.0)
    if at_step is not None:
        for status in targets:
            if status.rate:
                left = at_step + steps - _current_step(status, now)
                expected = max(expected, delay + left / status.rate)
    return max(MIN_TIMEOUT_S, TIMEOUT_MARGIN_S + expected)


def write_requests(request, targets):
    """The request into each targets' folder (its targets only): each written aside first,
    then all renamed into place; TraceError (nothing renamed) when one cannot be written."""
    folders = {}
    for status in targets:
        folders.setdefault(os.path.dirname(status.path), []).append(status)
    moves = []
    folder = None
    try:
        for folder, group in folders.items():
            body = dict(request, targets=[{"host": s.host, "pid": s.pid} for s in group])
            tmp = os.path.join(folder, f"{REQUEST_NAME}.tmp.{os.getpid()}")
            moves.append((tmp, os.path.join(folder, REQUEST_NAME)))
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(body, ensure_ascii=False) + "\n")
        for tmp, final in moves:
            os.replace(tmp, final)
    except OSError as error:
        for tmp, _ in moves:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        failed = os.path.dirname(error.filename) if error.filename else folder
        raise TraceError(
            f"{printable(failed)}: cannot write the capture request "
            f"({error.strerror or error}); run capture as the job's user, or make "
            "the folder writable"
        ) from None


def _shown(path):
    relative = os.path.relpath(path)
    return printable(path if relative.startswith("..") else relative)


class _Watch:
    """One target while the command waits: what has been said, and how it ended (outcome,
    None while it runs; done: its file)."""

    def __init__(self, status):
        self.status = status
        self.said = set()
        self.state = None
        self.outcome = None
        self.file = None

    def _say(self, event, line, progress):
        if event not in self.said:
            self.said.add(event)
            progress(line)

    def _end(self, outcome, progress, line=None):
        self.outcome = outcome
        progress(f"{self.status.label()} {line or outcome}")

    def look(self, request_id, now, progress):
        current = read_status(self.status.path)
        label = self.status.label()
        if current.gone:
            return self._end("exited before finishing (its status record is gone)", progress)
        if current.error is not None:
            return None  # caught midway twice: the next poll reads it again
        answer = current.answer(request_id)
        if answer is not None and answer.get("answer") == "refused":
            return self._end(
                f"refused: {printable(answer.get('why') or 'no reason given')}", progress
            )
        entry = current.capture(request_id)
        if answer is not None or entry is not None:
            self._say("accepted", f"{label} accepted", progress)
        state = entry.get("state") if entry is not None else None
        self.state = state or self.state
        if state in ("recording", "writing"):
            self._say("recording", f"{label} recording", progress)
        if state == "done" and isinstance(entry.get("file"), str):
            self.file = current.resolve(entry["file"])
            return self._end("done", progress, f"done: {_shown(self.file)}")
        if state in FINISHED:
            error = entry.get("error") or (
                "its capture names no file" if state == "done" else "no error given"
            )
            return self._end(f"failed: {printable(error)}", progress)
        stale = current.staleness(now)
        if stale:
            return self._end("died" if stale == "dead" else f"went {stale}", progress)
        return None

    def timed_out(self, timeout):
        if "accepted" not in self.said:
            self.outcome = f"did not answer in {timeout:.0f} s"
        else:
            self.outcome = (
                f"did not finish in {timeout:.0f} s (its capture "
                f"{printable(self.state or 'not started')})"
            )


class Result:
    """A capture's end: ``request_id``, ``files`` (the done captures, by rank) and ``problems``
    (a phrase per target that did not finish done, naming it)."""

    def __init__(self, request_id, watches):
        self.request_id = request_id
        self.files = [w.file for w in watches if w.outcome == "done"]
        self.problems = [f"{w.status.who()} {w.outcome}" for w in watches if w.outcome != "done"]
        self.all_passed = bool(watches) and all(
            (w.outcome or "").startswith("refused: step") and "has passed" in w.outcome
            for w in watches
        )


def _announce(request_id, at_step, steps, seconds, n):
    processes = f"{n} process" + ("es" if n != 1 else "")
    if at_step is None:
        return f"request {request_id}: {seconds:g} s from now on {processes}"
    more = f", --seconds {seconds:g}" if seconds is not None else ""
    return f"request {request_id}: steps {at_step}..{at_step + steps - 1} on {processes}{more}"


def capture(
    where,
    steps=None,
    roundup=None,
    at=None,
    seconds=None,
    memory=False,
    timeout=None,
    note=lambda message: None,
    progress=lambda line: None,
):
    """Asks the live processes ``where`` names (a pattern, a folder, a pid) to record steps
    ``steps`` from the next multiple of ``roundup`` they can reach (or from step ``at``), or
    ``seconds`` from now; waits for them (``timeout``: default_timeout). Returns a Result;
    TraceError (nothing asked) when no target is left, one is busy, or the request cannot be
    written. When every process refused because the chosen step had passed (a job that sped up
    since its record was written), asks once more with a margin three times as wide."""
    widen = 1.0
    for attempt in range(2):
        result = _ask(where, steps, roundup, at, seconds, memory, timeout, note, progress, widen)
        if at is not None or attempt == 1 or not result.all_passed:
            return result
        note("every process was past the chosen step already; asking again with a wider margin")
        widen = 3.0
    return result


def _ask(where, steps, roundup, at, seconds, memory, timeout, note, progress, widen):
    targets = live_targets(where, note)
    now = time.time()
    check_free(targets, now)
    delay = see_delay(targets) * widen
    at_step = None
    if steps is not None:
        if at is None:
            at_step = first_step(targets, now, delay, roundup or 1)
        else:
            ahead = max(targets, key=lambda s: s.step)
            if at <= ahead.step:
                raise TraceError(
                    f"step {at} is already past on {ahead.who()} (at step "
                    f"{ahead.step}); give a later --at, or leave it out"
                )
            at_step = at
    if timeout is None:
        timeout = default_timeout(targets, now, delay, at_step, steps, seconds)
    request_id = uuid.uuid4().hex
    write_requests(
        {
            "fqntrace_request": 1,
            "id": request_id,
            "created": now,
            "expires": now + timeout,
            "targets": [],
            "at_step": at_step,
            "steps": steps,
            "seconds": seconds,
            "memory": bool(memory),
        },
        targets,
    )
    progress(_announce(request_id, at_step, steps, seconds, len(targets)))
    watches = [_Watch(s) for s in targets]
    deadline = now + timeout
    while True:
        now = time.time()
        for watch in watches:
            if watch.outcome is None:
                watch.look(request_id, now, progress)
        if all(w.outcome is not None for w in watches) or now >= deadline:
            break
        # Many targets: fewer rounds, so the file system sees at most ~2,000 reads a second.
        time.sleep(max(0.0, min(max(POLL_S, len(watches) / READS_PER_S), deadline - now)))
    for watch in watches:
        if watch.outcome is None:
            watch.timed_out(timeout)
    return Result(request_id, watches)
