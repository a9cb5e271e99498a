"""FQNTRACE_DEVICE=1 (fqntrace.profile(device=True)): device time per module in fqntrace's own
trace (docs/trace-format.md, *Device events*).

While fqntrace records (the whole run, each step window, each capture), torch's own Kineto
records too, with the device's activity (CUDA, or ROCm through the same API) and the CPU ops the
join needs (each device event names the op that launched it). When the recording ends, at the
step that ends it (or at exit), the device is synchronized as torch.profiler does when it stops,
Kineto's trace is joined to fqntrace's ops (fqntrace.analysis.device_join: the rule `annotate`
uses) and the device events go into fqntrace's file: the trace file's, or the capture's. A whole
run's session is rolled over every ROLL_STEPS steps so Kineto never holds a long job's events.

Kineto serves one profiler at a time: when the program starts its own torch.profiler, fqntrace's
collection pauses (its events so far are written) and resumes when that profiler stops; what ran
in between is in the program's own profiler trace, which fqntrace annotates with fqn and phase.

Kineto's callbacks are the starting thread's (and the autograd threads it starts), as for
torch.profiler: the thread that ends steps. Nothing here may reach the program: a failure is one
line on stderr and collection stops; the trace goes on without device events."""

import os
import sys
import tempfile
import threading

from fqntrace import _native

ROLL_STEPS = 10  # Kineto holds at most this many steps of a whole run's events
_PROFILER = "torch.autograd.profiler"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")

_asked = None  # fqntrace.profile(device=...) for its session; None: FQNTRACE_DEVICE
_collector = None


def _log(message):
    sys.stderr.write(f"fqntrace: {message}\n")


def ask(device):
    """fqntrace.profile(device=...): True, False, or None (FQNTRACE_DEVICE decides)."""
    global _asked
    _asked = device


def _wanted():
    """What FQNTRACE_DEVICE asks for: "gpu", "cpu" (no GPU needed: Kineto's CPU activity alone,
    the join with no device events; for tests) or None."""
    if _asked is not None:
        return "gpu" if _asked else None
    value = os.environ.get("FQNTRACE_DEVICE", "").strip().lower()
    if value in _OFF:
        return None
    if value in _ON:
        return "gpu"
    if value == "cpu":
        return "cpu"
    _log(
        f"FQNTRACE_DEVICE={os.environ.get('FQNTRACE_DEVICE')!r} is not a switch value; no device "
        "events. Set it to 1 (device time per module) or 0."
    )
    return None


class _Collector:
    def __init__(self, C, torch, activities):
        self.C = C
        self.torch = torch
        self.activities = activities
        self.profiler = sys.modules[_PROFILER]
        self.target = None  # (main, capture) the running Kineto session records for
        self.thread = None  # the thread that started it
        self.steps = 0  # steps since it started
        self.paused = False  # the program's own torch.profiler holds Kineto
        self.busy = False  # fqntrace's own calls into the profiler: the pause wrappers stand by
        self.failed = False

    def _config(self):
        from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

        # state, shapes, memory, stack, flops, modules, experimental: all off, as cheap as it gets.
        return ProfilerConfig(
            ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig()
        )

    def sync(self, step_ended=False):
        """Follows what fqntrace records now: stops the session whose recording ended (its
        events go to the file), starts one for a recording that began."""
        if self.failed or self.paused or self.busy:
            return
        if self.thread is not None and self.thread != threading.get_ident():
            return  # Kineto's callbacks are the starting thread's: only it may stop them
        main, capture = self.C.recording_target()
        target = (bool(main), int(capture)) if (main or capture) else None
        self.steps += step_ended
        if target == self.target and not (target and self.steps >= ROLL_STEPS):
            return
        self._guarded(self._stop)
        if target is not None and not self.failed:
            self._guarded(self._start, target)

    def _guarded(self, action, *args):
        """action(*args), fqntrace's own calls into the profiler (the pause wrappers stand by);
        an error turns collection off with one line, never into the program."""
        self.busy = True
        try:
            action(*args)
        except Exception as error:
            self.fail(error)
        finally:
            self.busy = False

    def fail(self, error):
        self.failed = True
        self.target = None
        _log(
            f"FQNTRACE_DEVICE: device events off ({type(error).__name__}: {error}); the trace "
            "goes on with host time only"
        )
        try:
            self.C.expect_device_events(0)  # no capture waits for them
            self.C.device_collecting(True, f"failed: {type(error).__name__}")
        except Exception:
            pass

    def _start(self, target):
        if self.torch._C._autograd._profiler_enabled():
            self.paused = True  # the program's profiler holds Kineto: back when it stops
            return
        config = self._config()
        self.profiler._prepare_profiler(config, self.activities)
        self.C.record_function_ids(True)  # each range fqntrace records carries Kineto's handle
        try:
            self.profiler._enable_profiler(config, self.activities)
        except BaseException:
            self.C.record_function_ids(False)
            raise
        self.target, self.thread, self.steps = target, threading.get_ident(), 0
        if target[1]:
            self.C.expect_device_events(target[1])  # the capture's file waits for them

    def _stop(self):
        if self.target is None:
            return
        (main, capture), self.target = self.target, None
        if self.torch.cuda.is_initialized():
            self.torch.cuda.synchronize()  # as torch.profiler at its stop: the last kernels in
        try:
            result = self.profiler._disable_profiler()
        finally:
            self.C.record_function_ids(False)
        attribution = self.C.record_function_attribution()
        joined = _join(result, attribution)
        self.C.device_events(
            main, capture, joined.events, joined.left_out, joined.ops, joined.ops_joined
        )

    def pause(self):
        """The program's own torch.profiler is about to start."""
        if self.busy or self.paused:
            return
        try:
            self.sync()  # a recording that changed since the last step is followed first
        except Exception as error:
            self.fail(error)
        self._guarded(self._stop)
        self.paused = True

    def resume(self):
        """The program's own torch.profiler stopped."""
        if self.busy or not self.paused:
            return
        self.paused = False
        try:
            self.sync()
        except Exception as error:
            self.fail(error)

    def finish(self):
        """The session stops (exit, or the end of fqntrace.profile()): the last events in."""
        if self.thread is not None and self.thread != threading.get_ident():
            if self.target is not None:
                _log(
                    "FQNTRACE_DEVICE: the last recording's device events are not in the trace "
                    "(the session stopped on another thread than the one that started Kineto)"
                )
            return
        if not self.busy:
            self._guarded(self._stop)


def _join(result, attribution):
    """The device events of a stopped Kineto session (device_join.Joined)."""
    import json

    from fqntrace.analysis import device_join

    handle, path = tempfile.mkstemp(prefix="fqntrace-kineto-", suffix=".json")
    os.close(handle)
    try:
        result.save(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            doc = json.load(f)
    finally:
        os.unlink(path)
    return device_join.device_events(doc, attribution)


def install():
    """At a session's start (after the step hooks): collection starts when FQNTRACE_DEVICE asks
    for it and the process can have device events; else one line says why not."""
    global _collector
    _collector = None
    wanted = _wanted()
    C = _native.load()
    if wanted is None:
        C.device_collecting(False, "")
        return
    import torch
    from torch._C._profiler import ProfilerActivity

    activities = {ProfilerActivity.CPU}
    if wanted == "gpu":
        if not torch.cuda.is_available():
            C.device_collecting(True, "no GPU here")
            _log(
                "FQNTRACE_DEVICE=1: no GPU in this process (torch.cuda.is_available() is "
                "False); the trace has host time only"
            )
            return
        activities.add(ProfilerActivity.CUDA)
    C.device_collecting(True, "")
    _collector = _Collector(C, torch, activities)
    _wrap_profiler(C)
    from fqntrace import _steps

    _steps.follow_with(after_step)  # the optimizer hook: the step ends, then the collector syncs
    _collector.sync()


def after_step():
    """A step ended (fqntrace's optimizer hook or fqntrace.step())."""
    collector = _collector
    if collector is not None:
        try:
            collector.sync(step_ended=True)
        except Exception as error:  # never into the optimizer's step
            collector.fail(error)


def finish():
    """Before the session stops."""
    global _collector
    collector, _collector = _collector, None
    if collector is not None:
        collector.finish()


def _pause():
    if _collector is not None:
        _collector.pause()


def _resume():
    if _collector is not None:
        _collector.resume()


def _wrap_profiler(C):
    """The program's torch.profiler starts (prepare, enable) and stops: fqntrace's collection
    steps aside and comes back."""
    module = sys.modules[_PROFILER]
    pause, resume = C.unprofiled(_pause), C.unprofiled(_resume)
    _native.wrap_around(module, "_prepare_profiler", pause, None, "device")
    _native.wrap_around(module, "_enable_profiler", pause, None, "device")
    _native.wrap_around(module, "_disable_profiler", None, resume, "device")
