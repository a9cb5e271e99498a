"""Run a callback once a module has been imported: now if it already is, else right after its
first import finishes. Standard library only, since the start-up hook uses it before torch.

Used to activate tracing after `import torch` (fqntrace._autostart) and to wrap FSDP2's methods
after their module is imported (fqntrace._fsdp); neither module is imported for the purpose.
"""

import sys


def when_imported(name, callback):
    """Calls `callback(module)` once the module `name` has been imported (its body has run)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    finder = _AfterImport(name, callback)
    native = sys.modules.get("fqntrace._native")
    C = native.loaded() if native is not None else None
    if C is not None:
        # Every import asks the finder until its module comes: unseen by the program's Python
        # profilers (torch.profiler with_stack=True), as all of fqntrace's Python code is.
        finder.find_spec = C.unprofiled(finder.find_spec)
    sys.meta_path.insert(0, finder)


class _AfterImport:
    """A finder that finds nothing itself: for its module it lets the other finders find it, then
    makes that spec's loader call the callback after the module's body has run. It leaves
    sys.meta_path on first sight of the module, so it costs one string compare per import until
    then and nothing after."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util  # not at start-up: only a process that imports the module pays

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        # The loader object is kept (patched, not replaced): module.__loader__ stays the real one,
        # with everything it offers (get_source, resource readers).
        loader = spec.loader
        exec_module = loader.exec_module
        callback = self.callback

        def exec_then_call_back(module):
            exec_module(module)
            if module.__name__ == fullname:  # a loader may be shared by several modules
                callback(module)

        loader.exec_module = exec_then_call_back
        return spec
