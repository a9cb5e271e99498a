"""The status records of armed processes (docs/on-demand.md): where they are, reading one,
whether its process is still there, and `python -m fqntrace ps`'s table.

A job started with FQNTRACE_STEPS=demand keeps, per process, one JSON record in
`<trace dir>/.fqntrace/<trace name>.status`, rewritten in place about once a second, and a
pointer `/tmp/fqntrace-<uid>/<pid>` holding that record's absolute path. Everything read from a
record is data: names are shown through trace_events.printable.
"""

import fnmatch
import glob
import json
import os
import socket
import time

from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import is_number, printable

STATUS_FOLDER = ".fqntrace"
STATUS_SUFFIX = ".status"
REQUEST_NAME = "request.json"
STALE_S = 5.0  # a record not refreshed for this long: its process is dead or stuck
RETRY_S = 0.05  # a record caught half rewritten is read again after this long
BUSY = ("pending", "recording", "writing")  # a capture's states before done / failed
FINISHED = ("done", "failed")
HINT = "start the job with FQNTRACE_STEPS=demand"


def pointer_folder():
    return f"/tmp/fqntrace-{os.getuid()}"


def load_json(path):
    """The JSON object in a file written in place: trailing spaces and NULs (the padding) left
    out; a parse error is retried once after RETRY_S (the writer may be midway). Raises OSError
    (FileNotFoundError: no such file) or ValueError."""
    for attempt in (0, 1):
        with open(path, "rb") as f:
            raw = f.read()
        try:
            return json.loads(raw.rstrip(b" \t\r\n\0").decode("utf-8"))
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            if attempt:
                raise
            time.sleep(RETRY_S)


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Status:
    """One status record: ``path``, its fields ``data`` ({} when unreadable) and ``error`` (why
    it is unreadable, None when read); ``gone``: the file does not exist (a clean exit)."""

    def __init__(self, path, data=None, error=None, gone=False):
        self.path = path
        self.data = data or {}
        self.error = error
        self.gone = gone

    @property
    def pid(self):
        return _int(self.data.get("pid"))

    @property
    def rank(self):
        return _int(self.data.get("rank"))

    @property
    def host(self):
        return str(self.data.get("host", ""))

    @property
    def step(self):
        return _int(self.data.get("step")) or 0

    @property
    def rate(self):
        rate = self.data.get("steps_per_s")
        return float(rate) if is_number(rate) and rate > 0 else 0.0

    @property
    def updated(self):
        updated = self.data.get("updated")
        return float(updated) if is_number(updated) else 0.0

    @property
    def local(self):
        return self.host == socket.gethostname()

    def label(self):
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def who(self):
        """'rank 1 (pid 4243, host node7)': the process in a line that names several."""
        return f"{self.label()} (pid {self.pid}, host {printable(self.host)})"

    def key(self):
        return (self.host, self.pid)

    def staleness(self, now=None):
        """None while its process is alive and refreshing; else 'dead' (its pid is gone, on this
        host) or 'stale (42 s)' (not refreshed for more than STALE_S)."""
        now = time.time() if now is None else now
        if self.local and not pid_alive(self.pid):
            return "dead"
        if now - self.updated > STALE_S:
            return f"stale ({now - self.updated:.0f} s)"
        return None

    def resolve(self, path):
        """A path the process wrote (its trace, a capture file) as seen from here: a relative
        one is relative to the process's working folder."""
        return os.path.normpath(os.path.join(str(self.data.get("cwd", "")), str(path)))

    def captures(self):
        return [c for c in self.data.get("captures") or [] if isinstance(c, dict)]

    def capture(self, request_id):
        """This process's capture for that request, None if it has none."""
        for entry in reversed(self.captures()):
            if entry.get("id") == request_id:
                return entry
        return None

    def answer(self, request_id):
        """Its answer to that request: {'answer': ..., 'why': ...}, or None if not answered."""
        answer = self.data.get("request")
        if isinstance(answer, dict) and answer.get("id") == request_id:
            return answer
        return None

    def busy(self):
        """What it is recording, in words, or None when no capture runs."""
        for entry in self.captures():
            if entry.get("state") in BUSY:
                return (
                    f"capture {printable(entry.get('file', '?'))} is "
                    f"{printable(entry.get('state'))}"
                )
        if self.data.get("state") == "capturing":
            return "it is capturing"
        return None


def read_status(path):
    """The record at path as a Status (never raises: error / gone say what went wrong)."""
    try:
        data = load_json(path)
    except FileNotFoundError:
        return Status(path, error="its file is gone (the process has exited)", gone=True)
    except OSError as error:
        return Status(path, error=f"cannot read it ({error.strerror or error})")
    except ValueError as error:
        return Status(path, error=f"not JSON ({printable(error)})")
    if not isinstance(data, dict) or data.get("fqntrace_status") != 1:
        return Status(path, error="not a status record of this fqntrace (fqntrace_status 1)")
    if not (_int(data.get("pid")) or 0) > 0:
        return Status(path, error="it names no pid")
    return Status(path, data)


# ---------------------------------------------------------------------------------------------
# Finding the records


def locate(where=None):
    """The records ``where`` names, and in words where they were looked for.

    None: every process of this user on this host (its pointer in /tmp/fqntrace-<uid>/); a
    folder: the records in its .fqntrace/; digits: that pid's record (TraceError when it has
    none); else a pattern of trace paths, a glob or the FQNTRACE value with {rank} / {pid}: the
    records in the pattern's folder's .fqntrace/ whose trace matches it or whose pattern is it."""
    if where is None:
        return _from_pointers()
    if os.path.isdir(where):
        folder = os.path.join(where, STATUS_FOLDER)
        paths = sorted(glob.glob(os.path.join(glob.escape(folder), "*" + STATUS_SUFFIX)))
        return [read_status(p) for p in paths], f"in {folder}/"
    if where.isdigit():
        return [from_pid(int(where))], f"for pid {where}"
    return _from_pattern(where)


def _pointer_target(path):
    with open(path, "rb") as f:
        return f.read().rstrip(b" \t\r\n\0").decode("utf-8", errors="surrogateescape")


def from_pid(pid):
    pointer = os.path.join(pointer_folder(), str(pid))
    try:
        path = _pointer_target(pointer)
    except FileNotFoundError:
        raise TraceError(
            f"pid {pid} is not an armed fqntrace process on this host (no {pointer}); {HINT}"
        ) from None
    except OSError as error:
        raise TraceError(f"{pointer}: cannot read it ({error.strerror or error})") from None
    status = read_status(path)
    if status.gone:
        raise TraceError(f"pid {pid} has exited: its status record {printable(path)} is gone")
    if status.error is None and status.pid != pid:
        raise TraceError(
            f"pid {pid} is not an armed fqntrace process on this host: "
            f"{pointer} is left over and names the record of pid {status.pid}"
        )
    return status


def _from_pointers():
    folder = pointer_folder()
    try:
        names = sorted((n for n in os.listdir(folder) if n.isdigit()), key=int)
    except OSError:
        names = []
    found, seen = [], set()
    for name in names:
        try:
            path = _pointer_target(os.path.join(folder, name))
        except OSError:
            continue
        status = read_status(path)
        # A record removed (a clean exit) or now another process's: a pointer left over.
        if path in seen or status.gone or (status.error is None and str(status.pid) != name):
            continue
        seen.add(path)
        found.append(status)
    return found, f"in {folder}/ (the armed processes of this user on this host)"


def _from_pattern(pattern):
    as_glob = pattern.replace("{rank}", "*").replace("{pid}", "*")
    # taken from the current folder, whose name is no pattern
    wanted = os.path.normpath(os.path.join(glob.escape(os.getcwd()), as_glob))
    name_glob = os.path.basename(as_glob) + STATUS_SUFFIX
    folders = sorted(glob.glob(os.path.join(os.path.dirname(as_glob), STATUS_FOLDER)))
    found = []
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*" + STATUS_SUFFIX))):
            status = read_status(path)
            if status.error is not None:  # only its file name can tell whose it is
                if fnmatch.fnmatchcase(os.path.basename(path), name_glob):
                    found.append(status)
            elif status.data.get("pattern") == pattern or fnmatch.fnmatchcase(
                status.resolve(status.data.get("trace", "")), wanted
            ):
                found.append(status)
    places = (
        ", ".join(f"{f}/" for f in folders)
        or f"{os.path.join(os.path.dirname(as_glob), STATUS_FOLDER)}/ (no such folder)"
    )
    return found, f"for traces {pattern} in {places}"


def readable(statuses, note):
    """The records that could be read, a note for each of the others."""
    for status in statuses:
        if status.error is not None:
            note(f"{printable(status.path)}: unreadable status record: {status.error}")
    return [s for s in statuses if s.error is None]


def by_rank(statuses):
    return sorted(statuses, key=lambda s: (s.rank is None, s.rank or 0, s.pid))


def none_found(searched):
    return TraceError(f"no status record {searched}; {HINT}")


# ---------------------------------------------------------------------------------------------
# `ps`

COLUMNS = ("RANK", "PID", "HOST", "STEP", "STEPS/S", "STATE", "LAST CAPTURE", "TRACE")
RIGHT = {0, 1, 3, 4}  # the numbers' columns


def _rate_text(status):
    rate = status.rate
    return "-" if not rate else (f"{rate:.1f}" if rate < 100 else f"{rate:.0f}")


def ps_row(status, now):
    captures = status.captures()
    last = captures[-1] if captures else None
    capture = (
        f"{printable(last.get('file', '?'))} {printable(last.get('state', '?'))}" if last else "-"
    )
    state = status.staleness(now) or printable(status.data.get("state", "?"))
    return (
        "-" if status.rank is None else str(status.rank),
        str(status.pid),
        printable(status.host),
        str(status.step),
        _rate_text(status),
        state,
        capture,
        printable(status.data.get("trace", "?")),
    )


def ps_lines(where=None, note=lambda message: None):
    """`ps`'s table of the records ``where`` names (locate's argument), sorted by rank and pid;
    TraceError when there is none."""
    statuses, searched = locate(where)
    statuses = readable(statuses, note)
    if not statuses:
        raise none_found(searched)
    now = time.time()
    rows = [COLUMNS] + [ps_row(s, now) for s in by_rank(statuses)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for row in rows:
        cells = [
            row[i].rjust(widths[i]) if i in RIGHT else row[i].ljust(widths[i])
            for i in range(len(COLUMNS))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines
