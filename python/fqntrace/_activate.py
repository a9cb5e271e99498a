"""Turns on module names for a session started from FQNTRACE. Imported by the native library
(after torch.ops.load_library) and by the start-up hook once torch is imported."""
from fqntrace import _coexist, _distributed, _exit, _fsdp, _hooks, _kineto_hook, _native, _steps

if _native.load().running():
    _exit.finish_before_teardown()
    _exit.mirror_parent_marker()
    _hooks.install()
    _distributed.watch_process_group()
    _fsdp.install()
    _steps.install()
    _coexist.install()
    _kineto_hook.install()
