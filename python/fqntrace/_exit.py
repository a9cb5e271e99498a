"""Finishing the session before the interpreter tears down.

The native library's own exit hook (a C++ atexit handler) runs after Python's finalization has
begun destroying objects: too late for a job whose exit aborts (a gloo thread dropping a Python
object while the interpreter finalizes), and the events still in the rings are lost with it.
So, once per process, when a session starts:
- when the main thread's code has ended (threading's exit hook, before any `atexit` handler,
  whenever it was registered), everything recorded is written to the file;
- the session is stopped (drained, tail written, closed) from an `atexit` handler, or by
  `os._exit` (which skips both hooks) just before it ends the process, and then the summary
  FQNTRACE_FORMATS=summary asks for is written from the finished trace (`_summary_file`).
An abort inside another `atexit` handler therefore leaves a file that `fqntrace repair` closes
with every event of the program's main code in it.
"""

import atexit
import os
import threading

from fqntrace import _device_time, _native, _summary_file

_registered = False


def _flush():
    try:
        _native.load().flush()
    except Exception:  # never break the program's exit
        pass


def _stop():
    try:
        _device_time.finish()  # FQNTRACE_DEVICE: the last recording's device events first
        binding = _native.load()
        binding.stop()  # a failure was already reported on stderr
    except Exception:
        return
    _summary_file.write_finished(binding)


def _stopping_exit(original, owner_pid):
    def _exit(status):
        if os.getpid() == owner_pid:  # a forked child (DataLoader worker) never writes our file
            _stop()
        original(status)

    _exit.__doc__ = original.__doc__
    _exit.__wrapped__ = original
    return _exit


def mirror_parent_marker():
    """The library marked this process as a traced parent in the C environment (FQNTRACE_PARENT,
    docs/reliability.md), which exec'ed children inherit; os.environ is a copy taken at start-up,
    so children started with env=os.environ.copy() need it there too."""
    try:
        import ctypes

        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_char_p
        value = getenv(b"FQNTRACE_PARENT")
        if value:
            os.environ["FQNTRACE_PARENT"] = os.fsdecode(value)
    except Exception:  # only a convenience for children
        pass


def finish_before_teardown():
    """Registers the exit hooks, once per process."""
    global _registered
    if _registered:
        return
    _registered = True
    atexit.register(_stop)
    os._exit = _stopping_exit(os._exit, os.getpid())
    register = getattr(threading, "_register_atexit", None)  # private; absent: atexit alone
    if register is not None:
        try:
            register(_flush)
        except RuntimeError:  # interpreter already shutting down
            pass
