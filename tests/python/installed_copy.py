"""A copy of an installed fqntrace package, put first on PYTHONPATH, to run a program under a
build made for another torch: tests/python/test_install.py (a record that names another torch)
and tests/compat/test_other_torch.py (the main venv's real build, under a newer torch)."""

import glob
import os
import shutil
import subprocess
import sys


def site_packages(venv):
    found = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    assert found, f"no site-packages under {venv}"
    return found[0]


def copy_package(venv, dest, torch_version=None):
    """Copies `venv`'s installed fqntrace to dest/fqntrace; with `torch_version`, its build record
    then says it was built for that torch. Returns dest (for PYTHONPATH)."""
    shutil.copytree(
        os.path.join(site_packages(venv), "fqntrace"),
        os.path.join(dest, "fqntrace"),
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    if torch_version is not None:
        record = os.path.join(dest, "fqntrace", "_build_info.py")
        lines = [
            f'TORCH_VERSION = "{torch_version}"\n' if line.startswith("TORCH_VERSION =") else line
            for line in open(record)
        ]
        with open(record, "w") as f:
            f.writelines(lines)
    return str(dest)


def run(args, pythonpath, env_extra=None, cwd=None):
    """Runs `python args...` of this interpreter with `pythonpath` first (FQNTRACE only as
    given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FQNTRACE", "PYTHONPATH")}
    env["PYTHONPATH"] = pythonpath
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )


def rebuild_prefix():
    """How the mismatch line's command starts in this environment."""
    return f"{sys.executable} -m pip install --force-reinstall --no-deps --no-cache-dir "
