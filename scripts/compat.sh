#!/usr/bin/env bash
# The compatibility tier (docs/install.md), run by scripts/test.sh after the main suite: fqntrace
# installed the way a user installs it, into a second venv (.venv-compat/) with another torch —
# the one tests/compat/constraints.txt pins, PyPI's default CUDA wheel, on a machine without a
# CUDA toolkit — then a traced training loop validated, the C++ tests built against that torch,
# and a core subset of the Python tests. Idempotent; pip's download cache is reused between runs.
# Usable alone once scripts/setup.sh has run (the main .venv's build is imported under this torch).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv-compat"
PY="$VENV/bin/python"
# Our own constraint file also replaces the machine's (which caps torch below the newest release).
export PIP_CONSTRAINT="$ROOT/tests/compat/constraints.txt"
TORCH_SPEC="$(grep -E '^torch==' "$PIP_CONSTRAINT")"
log() { echo "[compat] $*" >&2; }
# pip with its own exit status (set -e stops on it), without the machine's index warnings.
quiet_pip() { "$PY" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }; }
start=$(date +%s)

if [ ! -x "$PY" ]; then
  log "creating .venv-compat"
  python3.11 -m venv "$VENV" 2>/dev/null || python3 -m venv "$VENV"
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if 'torch=='+torch.__version__.split('+')[0]=='$TORCH_SPEC' else 1)" 2>/dev/null; then
  log "installing $TORCH_SPEC (PyPI's default wheel)"
  quiet_pip install -q "$TORCH_SPEC"
fi
# The build tools the README's command needs, then what the tier's tests import (torch pinned).
need=()
for spec in scikit_build_core:scikit-build-core cmake:cmake ninja:ninja pytest:pytest \
            xdist:pytest-xdist msgspec:msgspec numpy:numpy transformers:transformers peft:peft \
            accelerate:accelerate lightning:lightning; do
  # -I: the probe must not see the repository's folders (cmake/ would pass for the cmake package).
  "$PY" -I -c "import ${spec%%:*}" 2>/dev/null || need+=("${spec##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  quiet_pip install -q "${need[@]}"
fi
"$PY" -c "import torch; assert 'torch=='+torch.__version__.split('+')[0] == '$TORCH_SPEC', torch.__version__"
installed=$(date +%s)

# The user's command (README), with the build kept in build-compat/ and the tests on for ctest.
log "pip install --no-build-isolation . (against $("$PY" -c 'import torch; print(torch.__version__)'))"
quiet_pip install -q --no-build-isolation --no-deps --force-reinstall \
  -C build-dir=build-compat -C cmake.define.FQNTRACE_TRACER=ON \
  -C cmake.define.FQNTRACE_BUILD_TESTS=ON -C cmake.define.FQNTRACE_WERROR=ON "$ROOT"
"$PY" -m fqntrace doctor
built=$(date +%s)

echo "== compat: a traced training loop, validated"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$out" && FQNTRACE="$out/run.json" "$PY" "$ROOT/tests/compat/train_loop.py")
"$PY" -m fqntrace validate "$out/run.json"
"$PY" -m fqntrace summary "$out/run.json" --depth 2

echo "== compat: C++ tests (ctest) against this torch"
(cd build-compat && ctest --output-on-failure -j 2)

echo "== compat: core Python tests under this torch"
unset FQNTRACE
FQNTRACE_OTHER_BUILD="$ROOT/.venv" "$PY" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  tests/compat tests/python/test_tracing.py tests/python/test_steps.py \
  tests/python/test_device_time.py \
  tests/python/test_ecosystem.py \
  "tests/python/test_compile.py::test_tracing_does_not_change_the_compiled_program[whole]" \
  "tests/python/test_compile.py::test_tracing_does_not_change_the_compiled_program[method_graph_break]" \
  tests/python/test_compile.py::test_summary_of_compiled_model_shows_submodules
end=$(date +%s)
echo "== compat tier passed in $(( end - start )) s (venv $(( installed - start )) s, build and install $(( built - installed )) s, tests $(( end - built )) s)"
