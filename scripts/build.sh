#!/usr/bin/env bash
# Configures and builds into build/ with Ninja against the .venv's torch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/cmake-configure.log 2>&1 \
    || { cat build/cmake-configure.log >&2; exit 1; }
fi
cmake --build build -j "$(nproc)"
