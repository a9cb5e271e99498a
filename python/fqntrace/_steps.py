"""Training steps with no code change: every torch.optim optimizer step ends a step.

One global optimizer post hook (torch.optim.optimizer.register_optimizer_step_post_hook) fires
after the step() of any torch Optimizer, HF's and FSDP's included (accelerate's wrapper calls the
wrapped optimizer's step()). The hook is the C function itself: no Python frame per step. It runs
inside the optimizer's ``Optimizer.step#…`` range, so the core ends the step where that range ends.

A program that calls fqntrace.step() itself decides where steps end: its first call in a session
removes the optimizer hook, so a step is never ended twice. The choice lasts one session: the next
session (fqntrace.profile()) starts with the optimizer hook again, as a fresh process would.
"""

from fqntrace import _native

_handle = None
_explicit = False
_after = None  # FQNTRACE_DEVICE's collector, called once a step has ended (follow_with)


def _register(hook):
    global _handle
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if _handle is not None:
        _handle.remove()
    _handle = register_optimizer_step_post_hook(hook)


def install():
    """At a session's start: the optimizer hook ends steps until the program calls step()
    (idempotent)."""
    global _explicit
    _explicit = False
    if _handle is None:
        _register(_native.load().optimizer_step)


def follow_with(after):
    """FQNTRACE_DEVICE: every step's end, then after() — the optimizer hook does both (one hook,
    so the step has ended when after() runs, whatever other hooks the program registers), and so
    does step()."""
    global _after
    _after = after
    if _handle is None:
        return
    C = _native.load()

    def hook(optimizer, args, kwargs):
        C.optimizer_step(optimizer, args, kwargs)
        after()

    _register(C.unprofiled(hook))


def step():
    """Ends the current training step (``ProfilerStep#N`` in the trace; FQNTRACE_STEPS counts
    these). Call it once per iteration in a loop without a torch.optim optimizer, or to choose
    the boundaries yourself. Does nothing when not tracing."""
    global _explicit, _handle
    if not _explicit:
        _explicit = True
        if _handle is not None:
            _handle.remove()
            _handle = None
    _native.load().step()
    if _after is not None:
        _after()


def current_step():
    """Number of the step running now (steps ended so far in this session)."""
    return _native.load().current_step()


def capture(steps=3):
    """Records the next `steps` training steps into a capture file of their own beside the trace
    (``run.capture-1.json``, docs/on-demand.md), in an armed job (FQNTRACE_STEPS=demand) or any
    traced one. Returns True when the capture is scheduled, False when not tracing or when a
    capture is already under way. Raises ValueError for steps < 1."""
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise ValueError(f"fqntrace.capture: steps={steps!r}: expected a whole number >= 1")
    return bool(_native.load().capture(steps))
