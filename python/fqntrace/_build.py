"""Which torch this installation's tracer was built for, whether the torch imported here is that
one, and the one command that rebuilds it when it is not.

The build writes fqntrace/_build_info.py (cmake/build_info.py.in). A library built for another
torch is never loaded: its C++ would meet a libtorch whose symbols or class layouts differ, and a
crash inside the user's program is what this check exists to prevent. A package without the
record (a copy of the sources, as the sanitizer smoke test makes) is trusted as it is."""

import json
import shlex
import sys


def info():
    """The build record (module fqntrace._build_info), or None for an unrecorded copy."""
    try:
        from fqntrace import _build_info
    except ImportError:
        return None
    return _build_info


def installed_from():
    """Where pip installed this package from (its direct_url.json, PEP 610): a path, a
    `git+URL@rev`, or None when pip did not record it."""
    try:
        from importlib import metadata

        text = metadata.distribution("fqntrace").read_text("direct_url.json")
        record = json.loads(text) if text else None
    except Exception:
        return None
    if not record or not record.get("url"):
        return None
    url = record["url"]
    vcs = record.get("vcs_info")
    if vcs:
        revision = vcs.get("requested_revision") or vcs.get("commit_id")
        return f"{vcs.get('vcs', 'git')}+{url}" + (f"@{revision}" if revision else "")
    if url.startswith("file://"):
        from urllib.parse import unquote

        return unquote(url[len("file://") :])
    return url


def rebuild_command():
    """The pip command that rebuilds fqntrace against this environment's torch."""
    source = installed_from()
    where = shlex.quote(source) if source else "<fqntrace's git URL or source folder>"
    return (
        f"{shlex.quote(sys.executable)} -m pip install --force-reinstall --no-deps "
        f"--no-cache-dir {where}"
    )


def built_for(record):
    """'torch 2.13.0+cpu' as the record says (with the C++ ABI when it is the old one)."""
    abi = "" if record.TORCH_CXX11_ABI else ", pre-C++11 ABI"
    return f"torch {record.TORCH_VERSION}{abi}"


def problem(torch):
    """None when the tracer can be loaded under this `torch` module, else why not, in one sentence
    that ends with the command that fixes it."""
    record = info()
    if record is None:
        return None
    if not record.TRACER:
        return (
            "this fqntrace was installed without its tracer (its build found no torch, C++ "
            "compiler or Python headers; pip's output said which); with them here, rebuild "
            "it: " + rebuild_command()
        )
    version = getattr(torch, "__version__", "?")
    git = getattr(getattr(torch, "version", None), "git_version", "") or ""
    abi = getattr(getattr(torch, "_C", None), "_GLIBCXX_USE_CXX11_ABI", record.TORCH_CXX11_ABI)
    same = (
        version == record.TORCH_VERSION
        and bool(abi) == bool(record.TORCH_CXX11_ABI)
        and (not git or not record.TORCH_GIT_VERSION or git == record.TORCH_GIT_VERSION)
    )
    if same:
        return None
    return (
        f"it was built for {built_for(record)} and this is torch {version}; rebuild it for "
        f"this torch: {rebuild_command()}"
    )
