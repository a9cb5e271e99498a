"""Prints what CMake needs to build against the torch this interpreter imports, one KEY=VALUE per
line (cmake/FqntraceTorch.cmake reads them). Exit 3 when torch is not importable here.

Found from the installed package itself, not from torch's CMake config: that one insists on a CUDA
toolkit for CUDA wheels, and fqntrace observes on the host (c10, torch_cpu and the headers)."""

import os
import sys

try:
    import torch
except Exception:  # not installed, or broken: either way nothing to build the tracer against
    sys.exit(3)

root = os.path.dirname(os.path.abspath(torch.__file__))
values = {
    "ROOT": root,
    "INCLUDE_DIR": os.path.join(root, "include"),
    # the C++ frontend's headers (torch/nn/module.h, for fqntrace::ModuleScope's API)
    "API_INCLUDE_DIR": os.path.join(root, "include", "torch", "csrc", "api", "include"),
    "LIB_DIR": os.path.join(root, "lib"),
    "VERSION": torch.__version__,
    "GIT_VERSION": getattr(torch.version, "git_version", "") or "",
    "CUDA": getattr(torch.version, "cuda", None) or "",
    "CXX11_ABI": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
}
for key, value in values.items():
    print(f"{key}={value}")
