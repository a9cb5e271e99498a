"""fqntrace.profile(): trace the body of a with-block (for code that prefers it to FQNTRACE)."""

import contextlib
import itertools
import os
import sys
import tempfile

from fqntrace import _device_time, _features, _native, _summary_file

_numbers = itertools.count()


def temporary_path(kind="run"):
    """A new trace path in this process's own folder under the temporary directory (kept after
    the run: it is the user's data; the OS's temporary-file cleaning removes it)."""
    folder = os.path.join(tempfile.gettempdir(), f"fqntrace-{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{kind}-{next(_numbers)}.json")


class TracePath(str):
    """The path profile() wrote (a str, as before) that also gives the trace's results once the
    with-block has ended: `run.summary()`, `run.steps()`, `run.diff(other)`, `run.report()`,
    `run.load()` (fqntrace.load's Trace)."""

    def __new__(cls, path):
        self = super().__new__(cls, path)
        self._ended = False
        self._trace = None
        return self

    def load(self):
        if not self._ended:
            raise RuntimeError(
                f"fqntrace: {str(self)} is complete when the with-block has "
                "ended; ask for its results after the block"
            )
        if self._trace is None:
            from fqntrace.analysis import results

            self._trace = results.load(str(self))
        return self._trace

    def summary(self, *args, **kwargs):
        return self.load().summary(*args, **kwargs)

    def steps(self, *args, **kwargs):
        return self.load().steps(*args, **kwargs)

    def diff(self, *args, **kwargs):
        return self.load().diff(*args, **kwargs)

    def report(self, *args, **kwargs):
        return self.load().report(*args, **kwargs)

    def table(self, *args, **kwargs):
        return self.load().table(*args, **kwargs)

    def _repr_html_(self):
        return self.load()._repr_html_() if self._ended else None


def _steps_text(steps):
    """FQNTRACE_STEPS syntax from a `steps` argument: "A:B[:P]", range(A, B) or (A, B[, P])."""
    if steps is None or isinstance(steps, str):
        return steps
    if isinstance(steps, range):
        if steps.step != 1:
            raise ValueError(
                f"fqntrace: steps={steps!r}: a range of consecutive steps, "
                "e.g. range(10, 20); for a period use \"10:20:100\""
            )
        return f"{steps.start}:{steps.stop}"
    if isinstance(steps, (tuple, list)) and len(steps) in (2, 3):
        return ":".join(str(v) for v in steps)
    raise ValueError(
        f"fqntrace: steps={steps!r}: expected \"FIRST:END[:PERIOD]\", "
        "range(FIRST, END) or (FIRST, END[, PERIOD])"
    )


def _sample_text(sample):
    """profile()'s sample as FQNTRACE_SAMPLE's text; a value that is not a probability raises."""
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0 < sample <= 1:
        raise ValueError(
            f"fqntrace: sample={sample!r} is not a probability in (0, 1]; "
            "e.g. sample=0.01 records 1 op in 100"
        )
    return repr(float(sample))


@contextlib.contextmanager
def profile(path=None, steps=None, memory=None, sample=None, cpu=None, device=None):
    """Traces everything the body runs to `path` (.json: Chrome trace, .jsonl: JSON Lines, .gz
    after either: gzip; {pid} and {rank} are expanded; None: a new file under the temporary
    directory). Yields the expanded path, a str whose .summary(), .steps(), .diff(), .report()
    and .load() give the results after the block (fqntrace.load).
    `steps`: only these training steps are recorded ("10:20", range(10, 20), "10:20:100"; the
    FQNTRACE_STEPS syntax, docs/trace-format.md); a step ends at every optimizer step or
    fqntrace.step(). `memory=True` records the allocator's reports per module
    (FQNTRACE_MEMORY, docs/memory.md); None: as FQNTRACE_MEMORY says. `sample=p` (0 < p <= 1)
    records each op with probability p, for a long job traced all along (FQNTRACE_SAMPLE,
    docs/sampling.md); None: as FQNTRACE_SAMPLE says. `cpu=True` also records each module's
    thread CPU time (FQNTRACE_CPU, a system call per module call: docs/benchmarks.md); None: as
    FQNTRACE_CPU says. `device=True` also collects the GPU's kernels, copies and fills through
    torch's Kineto and writes them with the module and phase of the op that launched each
    (FQNTRACE_DEVICE, docs/trace-format.md); None: as FQNTRACE_DEVICE says. Raises ValueError for a
    bad path, steps or sample and RuntimeError if a session is already running (e.g. FQNTRACE is set).
    When the tracer cannot be loaded here (built for another torch, or missing), the body runs
    untraced, the block yields None, and one line on stderr says what rebuilds it."""
    try:
        C = _native.load()
    except _native.NotLoadable as error:
        sys.stderr.write(f"fqntrace: profile() runs its body untraced: {error.reason}\n")
        yield None
        return
    if path is None:
        path = temporary_path()
    expanded = TracePath(C.start(str(path), _steps_text(steps), memory, _sample_text(sample), cpu))
    _device_time.ask(device)
    # First of the parts: a body that never ends (os._exit, abort) still leaves a file.
    _features.install_all()
    try:
        yield expanded
    finally:
        _device_time.finish()  # the last recording's device events, before the file ends
        _device_time.ask(None)
        stopped = C.stop()
        _summary_file.write_finished(C)  # FQNTRACE_FORMATS=summary: from the finished trace
        if not stopped:
            raise RuntimeError(f"fqntrace: the trace {expanded} could not be written completely")
        expanded._ended = True
