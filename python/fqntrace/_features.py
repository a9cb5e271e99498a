"""The Python side of a session, set up once it has started (from FQNTRACE: fqntrace._activate;
from fqntrace.profile). Each part stands alone: a part that fails (a torch without a private API
it relies on) is off, with one line that says so, and the others and the trace go on."""

import sys

from fqntrace import (
    _coexist,
    _device,
    _device_time,
    _distributed,
    _exit,
    _fsdp,
    _hooks,
    _kineto_hook,
    _steps,
)

# (what the user loses if it fails, set-up), in the order they must run.
PARTS = (
    ("finishing the trace before interpreter teardown", _exit.finish_before_teardown),
    ("module names", _hooks.install),
    ("the process group's rank and backend", _distributed.watch_process_group),
    ("whether the process used a GPU (host-time notes)", _device.watch_device_use),
    ("FSDP2 collectives' module names", _fsdp.install),
    ("training steps from optimizer steps", _steps.install),
    ("starting torch.profiler beside fqntrace's memory reports", _coexist.install),
    ("fqn and phase in torch.profiler's own traces", _kineto_hook.install),
    ("device time per module (FQNTRACE_DEVICE)", _device_time.install),
)


def install_all():
    for what, set_up in PARTS:
        try:
            set_up()
        except Exception as error:
            sys.stderr.write(
                f"fqntrace: {what}: off ({type(error).__name__}: {error}); "
                "the rest of tracing goes on\n"
            )
