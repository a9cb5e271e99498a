#!/usr/bin/env bash
# The test command: sets everything up from nothing (idempotent), builds, checks that the docs
# and comments name only what exists and the lint and layout (seconds), then runs the C++ tests
# (GoogleTest via ctest) and the Python tests (pytest), then the compatibility tier (the package
# installed into a second venv with another torch, docs/install.md). Exit 0 only if all pass.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$(date +%s)
bash scripts/setup.sh
echo "== docs name only what exists (scripts/check_docs.py)"
.venv/bin/python scripts/check_docs.py
echo "== lint and layout: ruff, clang-format (scripts/lint.sh; --fix rewrites)"
bash scripts/lint.sh
echo "== C++ tests (ctest)"
(cd build && ctest --output-on-failure -j 2)
echo "== C++ tests under ASan+UBSan and TSan (scripts/sanitizers.sh)"
bash scripts/sanitizers.sh
echo "== Python tests (pytest)"
unset FQNTRACE
# Both cores, a test file per worker (a file's module fixtures and in-process state stay together).
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/python
echo "== Compatibility tier: installed as a user installs it, under another torch (scripts/compat.sh)"
bash scripts/compat.sh
echo "== all tests passed in $(( $(date +%s) - start )) s"
