#!/usr/bin/env bash
# The demo: sets everything up if needed, traces a few training steps of a small built-in
# transformer with no code change (FQNTRACE set, plain `python -m fqntrace.demo`), then prints the
# per-module summary, the trace path and the HTML report's path.
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
# The report is an extra (plotly); the demo's own job is done even if it cannot be written.
REPORT="$ROOT/traces/demo.html"
if .venv/bin/python -m fqntrace report "$TRACE" -o "$REPORT" >/dev/null; then
  echo "report: $REPORT  (open it in a browser; works offline)"
fi
