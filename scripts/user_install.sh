#!/usr/bin/env bash
# A user's install, timed (docs/install.md's measurements): a fresh venv in FOLDER with the torch
# SPEC names (e.g. torch==2.14.1; PyPI's default wheel), the build tools, then
# `pip install --no-build-isolation <this repository>`, a traced training loop, validate, summary.
#   scripts/user_install.sh torch==2.14.1 /tmp/try-2.14
# Prints the time of each step and the installed package's size. Not part of scripts/test.sh
# (scripts/compat.sh is the tier CI runs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPEC="${1:?usage: scripts/user_install.sh torch==VERSION FOLDER}"
DIR="${2:?usage: scripts/user_install.sh torch==VERSION FOLDER}"
# Our own constraint file replaces the machine's cap on torch (the spec itself pins torch).
export PIP_CONSTRAINT="$DIR/constraints.txt"
mkdir -p "$DIR" && echo "$SPEC" > "$PIP_CONSTRAINT"
PY="$DIR/venv/bin/python"
step() {  # runs a command (set -e stops on its failure), then prints how long it took
  local t=$SECONDS
  "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }
  echo "[$(( SECONDS - t )) s] ${*:2}" >&2
}
[ -x "$PY" ] || python3 -m venv "$DIR/venv"
step "$PY" -m pip install -q "$SPEC"
step "$PY" -m pip install -q scikit-build-core cmake ninja
step "$PY" -m pip install -q --no-build-isolation "$ROOT"
"$PY" -m fqntrace doctor
(cd "$DIR" && FQNTRACE="$DIR/run.json" "$PY" "$ROOT/tests/compat/train_loop.py")
"$PY" -m fqntrace validate "$DIR/run.json"
"$PY" -m fqntrace summary "$DIR/run.json" --depth 1
du -sh "$("$PY" -c 'import fqntrace, os; print(os.path.dirname(fqntrace.__file__))')"
