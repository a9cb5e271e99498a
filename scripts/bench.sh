#!/usr/bin/env bash
# Benchmarks fqntrace against an empty RecordFunction observer, torch.profiler and ModTracker
# (P1 per-op + MLP, P2 transformer step, P3 ModTracker, P4 exporter throughput, P5 memory and
# trace size, P6 library loaded but off, P7 the drain thread's CPU per event and
# the demo's bytes per op event, P8 the DDP 2-rank step, in-process A/B). Sets up first
# (scripts/setup.sh), builds the bench helpers, runs bench/driver.py, prints the table, writes
# each part's summary to bench/measured.json (raw samples to build/bench/raw/) and fills the
# generated sections of docs/benchmarks.md (the hand-written analysis around them is left alone).
#   scripts/bench.sh            full run (~20 min on 2 cores, plus set-up when it rebuilds)
#   scripts/bench.sh --quick    smoke run: fewer rounds and ops (~3 min, plus set-up)
#   scripts/bench.sh --cli [MiB]  P9: every `python -m fqntrace` verb on a MiB-sized trace (default
#                               300; Chrome and JSON Lines), CPU s, events/CPU-s, peak RSS against
#                               each verb's target; prints the table and, at 300 or 1024 MiB,
#                               replaces bench/measured.json's part cli-MiB and refills
#                               docs/benchmarks.md's P9 and opening tables.
#                               Needs ~10x MiB of disk in build/cli_bench while it runs
#   --python PY --build DIR     no set-up: run PY (a venv with fqntrace installed) and take P4's
#                               exporter benchmark from the build DIR (e.g. another checkout's)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
QUICK=()
CLI=""
CLI_MB=300
PY=""
BUILD="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --cli) CLI=1 ;;
    --python) PY="$2"; shift ;;
    --build) BUILD="$(cd "$2" && pwd)"; shift ;;
    [0-9]*) CLI_MB="$1" ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (use --quick, --cli [MiB], --python PY --build DIR)" >&2
       exit 2 ;;
  esac
  shift
done
log() { echo "[bench] $*" >&2; }

if [ -z "$PY" ]; then
  bash "$ROOT/scripts/setup.sh"
  PY="$ROOT/.venv/bin/python"
fi
export FQNTRACE_BENCH_BUILD="$BUILD"

if [ -n "$CLI" ]; then
  # The source of the big traces: a real trace of the demo (written once).
  [ -f "$ROOT/traces/demo.json" ] || { mkdir -p "$ROOT/traces"; FQNTRACE="$ROOT/traces/demo.json" \
    FQNTRACE_FLOPS=1 "$PY" -m fqntrace.demo >/dev/null; }
  exec "$PY" "$ROOT/bench/cli_bench.py" "$ROOT/traces/demo.json" --mb "$CLI_MB"
fi

# The empty observer (the reference) and the callback probe: a separate tiny CMake project.
HELPERS="$ROOT/build/bench/empty_observer"
if [ ! -f "$HELPERS/build.ninja" ]; then
  log "configuring bench/empty_observer"
  mkdir -p "$HELPERS"
  cmake -S "$ROOT/bench/empty_observer" -B "$HELPERS" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$PY" >"$HELPERS/cmake-configure.log" 2>&1 \
    || { cat "$HELPERS/cmake-configure.log" >&2; exit 1; }
fi
cmake --build "$HELPERS" >/dev/null
for lib in libempty_observer.so libempty_sampled_observer.so libcallback_probe.so; do
  [ -f "$HELPERS/$lib" ] || { echo "[bench] $HELPERS/$lib was not built" >&2; exit 1; }
done
command -v valgrind >/dev/null || log "valgrind not found: the instruction counts are skipped"

# P4's exporter benchmark: a target of the main build, configured only when Google Benchmark is
# installed. A build directory configured before the package was there is configured again
# (CMake retries a package it did not find).
if [ ! -x "$BUILD/fqntrace_exporter_bench" ]; then
  cmake "$BUILD" >/dev/null
  cmake --build "$BUILD" --target fqntrace_exporter_bench >/dev/null 2>&1 \
    || log "fqntrace_exporter_bench could not be built (libbenchmark-dev missing?): P4 is skipped"
fi

"$PY" "$ROOT/bench/driver.py" "${QUICK[@]}"
