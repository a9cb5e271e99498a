#!/usr/bin/env bash
# Idempotent set-up shared by demo.sh and test.sh: Debian packages, the .venv with the pinned
# CPU torch, and fqntrace built (CMake build in build/) and installed into the venv by pip.
# Each step is skipped when its result is already there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TORCH_VERSION="2.13.0"
# libbenchmark-dev: only for scripts/bench.sh's exporter benchmark (P4); the tests never need it.
# chromium: the HTML report's browser tests (headless, driven over the DevTools protocol).
# tmux: the tests drive `python -m fqntrace top` in a tmux pane. libdeflate-dev: gzip outputs (CRC-32; zlib1g-dev was their deflate before).
# libsimdjson-dev: the CLI's native summary (fqntrace.analysis._native_summary).
# clang-format: the C++ layout check (scripts/lint.sh).
APT_PACKAGES=(nlohmann-json3-dev libgtest-dev jq libbenchmark-dev chromium tmux zlib1g-dev libdeflate-dev libsimdjson-dev clang-format)
log() { echo "[setup] $*" >&2; }

# --- Debian packages -------------------------------------------------------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python venv with the pinned torch --------------------------------------------------------
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
  log "creating .venv"
  python3.11 -m venv "$ROOT/.venv" 2>/dev/null || python3 -m venv "$ROOT/.venv"
fi
if ! "$PY" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$TORCH_VERSION' else 1)" 2>/dev/null; then
  log "installing torch==$TORCH_VERSION (CPU wheel)"
  "$PY" -m pip install -q "torch==$TORCH_VERSION"
fi
# Everything else only after torch, with torch pinned, so pip never swaps it out.
PIN="$ROOT/build/torch-pin.txt"; mkdir -p "$ROOT/build"; echo "torch==$TORCH_VERSION" > "$PIN"
need_py=()
# module:package pairs; transformers (tiny random-weight models) and HTA are used by the tests;
# plotly is the `report` extra (pyproject.toml), websocket-client and pillow drive and read
# the report's browser tests (the `test` extra); rich is the `top` extra (the live view);
# msgspec is the package's one dependency (the trace reader's decoder; the package itself is
# installed with --no-deps below); distributed is the `dask` extra (summary --scheduler).
# peft, accelerate and lightning: the ecosystem tier (tests/python/test_ecosystem.py).
# pytest-xdist: scripts/test.sh runs the test files on both cores.
# pandas is the `notebook` extra's DataFrames; nbformat, nbclient, ipykernel, nbconvert and
# jupyterlab run tests/python/test_notebook.py (a notebook executed on a real kernel, exported
# to HTML, opened in a JupyterLab server).
# scikit-build-core, cmake, ninja: the build tools `pip install --no-build-isolation .` needs.
for spec in pytest:pytest xdist:pytest-xdist numpy:numpy transformers:transformers hta:HolisticTraceAnalysis \
            plotly:plotly websocket:websocket-client PIL:pillow rich:rich msgspec:msgspec \
            distributed:distributed peft:peft accelerate:accelerate lightning:lightning \
            scikit_build_core:scikit-build-core cmake:cmake ninja:ninja pandas:pandas \
            nbformat:nbformat nbclient:nbclient ipykernel:ipykernel nbconvert:nbconvert \
            jupyterlab:jupyterlab; do
  mod="${spec%%:*}"; pkg="${spec##*:}"
  # -I: the probe must not see the repository's folders (cmake/ would pass for the cmake package).
  "$PY" -I -c "import $mod" 2>/dev/null || need_py+=("$pkg")
done
if [ ${#need_py[@]} -gt 0 ]; then
  log "installing Python packages: ${need_py[*]}"
  "$PY" -m pip install -q -c "$PIN" "${need_py[@]}"
fi

# ruff, pinned: its lint rules and layout change between versions (scripts/lint.sh).
RUFF_VERSION="0.16.9"
if [ "$("$ROOT/.venv/bin/ruff" --version 2>/dev/null)" != "ruff $RUFF_VERSION" ]; then
  log "installing ruff==$RUFF_VERSION"
  "$PY" -m pip install -q -c "$PIN" "ruff==$RUFF_VERSION" 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
fi

# --- Build and install: the pip command a user runs (README, docs/install.md) -----------------
# It builds with CMake + Ninja against the venv's torch (scikit-build-core) and installs the
# package with its native libraries. For development the build stays in build/ (incremental; ctest,
# the benchmarks and the sanitizers' configure read it), the tests and -Werror are on, and the
# installed libraries keep their symbols (callgrind and perf name our functions).
# Rebuilt and reinstalled only when a source file changed or the package is missing.
rm -f "$ROOT"/python/fqntrace/*.so "$ROOT"/python/fqntrace/analysis/*.so  # copies of older set-ups
stamp_file="$ROOT/.venv/.fqntrace-installed"
stamp=$(git -C "$ROOT" ls-files -co --exclude-standard -- ':!docs' ':!tests/python' ':!bench' \
        | sort | xargs md5sum 2>/dev/null | md5sum | cut -d' ' -f1)
if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ] || [ ! -f "$ROOT/build/build.ninja" ] \
   || ! "$PY" -c "import fqntrace._build_info" 2>/dev/null; then
  log "building and installing fqntrace into .venv (pip install --no-build-isolation .)"
  # pip's own exit status stops the set-up (only the machine's index warnings are filtered out).
  "$PY" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
    -C build-dir=build -C cmake.build-type=RelWithDebInfo -C install.strip=false \
    -C cmake.define.FQNTRACE_TRACER=ON -C cmake.define.FQNTRACE_BUILD_TESTS=ON \
    -C cmake.define.FQNTRACE_WERROR=ON "$ROOT" 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  echo "$stamp" > "$stamp_file"
fi
"$PY" -c "import fqntrace, os; assert os.path.exists(fqntrace.library_path())" \
  || { echo "[setup] fqntrace did not install correctly (see the pip output above)" >&2; exit 1; }
