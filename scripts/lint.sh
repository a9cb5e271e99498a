#!/usr/bin/env bash
# Lint and layout, in seconds: ruff (lint and format) over the Python, clang-format over the C++
# (configs: pyproject.toml's [tool.ruff], .clang-format). `--fix` rewrites instead of checking.
# Exit 0 only if everything is clean. Needs the tools scripts/setup.sh installs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUFF="$ROOT/.venv/bin/ruff"
mapfile -t cxx < <(git ls-files -- '*.cpp' '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$RUFF" check --fix --quiet . || true  # what it cannot fix is listed; the check names it again
  "$RUFF" format --quiet .
  clang-format -i "${cxx[@]}"
  exec "$0"
fi
status=0
"$RUFF" check --quiet . || { echo "lint: ruff check found the above (scripts/lint.sh --fix fixes most)" >&2; status=1; }
"$RUFF" format --check --quiet . || { echo "lint: the files above are not ruff-formatted (scripts/lint.sh --fix)" >&2; status=1; }
clang-format --dry-run --Werror "${cxx[@]}" 2>/dev/null \
  || { echo "lint: C++ not clang-formatted: run scripts/lint.sh --fix" >&2; status=1; }
exit $status
