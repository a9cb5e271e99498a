"""Run a function once a module has been imported: now if it already is, else right after the
import finishes (a meta-path finder that steps aside once every awaited module has arrived).
Callbacks must not raise; any error is caught and reported as one line."""
import importlib.util
import sys

_waiting = {}  # module name -> [callback, ...]


def when_imported(name, callback):
    module = sys.modules.get(name)
    if module is not None:
        _run(name, callback, module)
        return
    _waiting.setdefault(name, []).append(callback)
    if _Finder.instance not in sys.meta_path:
        sys.meta_path.insert(0, _Finder.instance)


def _run(name, callback, module):
    try:
        callback(module)
    except Exception as error:  # never break the import the user asked for
        sys.stderr.write(f"fqntrace: setting up after `import {name}` failed ({error}); "
                         "tracing goes on without it.\n")


class _Finder:
    instance = None

    def find_spec(self, name, path=None, target=None):
        if name not in _waiting:
            return None
        # Find the real spec without ourselves in the way, then wrap its loader.
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if _waiting:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        callbacks = _waiting.pop(name)
        if not _waiting and self in sys.meta_path:
            sys.meta_path.remove(self)
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            for callback in callbacks:
                _run(name, callback, module)

        spec.loader.exec_module = exec_module
        return spec


_Finder.instance = _Finder()
