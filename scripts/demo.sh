#!/usr/bin/env bash
# The demo: sets everything up if needed, traces a few training steps of a small built-in
# transformer with no code change (FQNTRACE set, plain `python -m fqntrace.demo`), then prints the
# per-module summary and the trace path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh >&2
mkdir -p traces
TRACE="$ROOT/traces/demo.json"
# FLOPs are opt-in (they cost every op a little); the demo shows them unless told otherwise.
FQNTRACE="$TRACE" FQNTRACE_FLOPS="${FQNTRACE_FLOPS:-1}" .venv/bin/python -m fqntrace.demo "$@"
.venv/bin/python -m fqntrace summary "$TRACE" --depth 3
echo
echo "trace: $TRACE  (open it in https://ui.perfetto.dev or chrome://tracing)"
