"""Turns on module names for a session started from FQNTRACE. Imported by the native library
(after torch.ops.load_library) and by the start-up hook once torch is imported."""

from fqntrace import _exit, _features, _native

if _native.load().running():
    _features.install_all()
    _exit.mirror_parent_marker()
