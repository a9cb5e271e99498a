#!/usr/bin/env bash
# The C++ tests under sanitizers: once with ASan+UBSan (build-asan/), once with TSan
# (build-tsan/), each in its own build folder from tests/sanitize/CMakeLists.txt (what is built
# and why: see that file and docs/reliability.md). Any report fails the run: ASan and UBSan stop
# at the first error (halt_on_error, -fno-sanitize-recover), TSan exits non-zero on a report.
# Suppressions (commented, libtorch-internal only) live in tests/sanitize/*.supp.
# Called by scripts/test.sh after setup.sh; usable alone once .venv exists.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
JOBS="${FQNTRACE_SANITIZER_JOBS:-$(nproc)}"
SUPP="$ROOT/tests/sanitize"

run_one() {  # name, sanitizer, build folder
  local name="$1" sanitizer="$2" dir="$3" start
  start=$(date +%s)
  if [ ! -f "$dir/build.ninja" ]; then
    mkdir -p "$dir"
    cmake -S tests/sanitize -B "$dir" -G Ninja -DFQNTRACE_SANITIZER="$sanitizer" \
      -DPython3_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=Debug >"$dir/cmake-configure.log" 2>&1 \
      || { cat "$dir/cmake-configure.log" >&2; exit 1; }
  fi
  cmake --build "$dir" -j "$JOBS"
  local built=$(( $(date +%s) - start ))
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp" \
  LSAN_OPTIONS="suppressions=$SUPP/lsan.supp" \
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    "$dir/fqntrace_sanitize_tests" --gtest_brief=1
  echo "== $name: built in ${built} s, ran in $(( $(date +%s) - start - built )) s"
}

run_one "ASan+UBSan" address build-asan
run_one "TSan" thread build-tsan

# The whole plugin (observer, session, binding: they include libtorch's headers) under
# ASan+UBSan, driven from Python: the instrumented libfqntrace.so and _C go into a copy of the
# package, the sanitizer runtimes are preloaded into the (uninstrumented) interpreter and torch.
# Leak checking is off: the interpreter and torch keep their allocations until exit by design.
python_smoke() {
  local dir=build-asan-plugin start out
  start=$(date +%s)
  if [ ! -f "$dir/build.ninja" ]; then
    mkdir -p "$dir"
    # NDEBUG as libtorch was built: its headers lay classes out differently without it
    # (at::RecordFunction has a debug-only member), and the plugin would misread torch's objects.
    # -O1 -g1 (line tables: a report still names file and line): full debug information of
    # libtorch's templates was 40 % of this build's time.
    cmake -S . -B "$dir" -G Ninja -DPython3_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFQNTRACE_BUILD_TESTS=OFF -DFQNTRACE_WERROR=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
      "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
      "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
      "-DCMAKE_MODULE_LINKER_FLAGS=-fsanitize=address,undefined" >"$dir/cmake-configure.log" 2>&1 \
      || { cat "$dir/cmake-configure.log" >&2; exit 1; }
  fi
  # The summary engine too (the CLI's, no libtorch): its plain-line reader loads words of eight
  # and sixteen bytes at a time, where an off-by-one would read past a block.
  local targets=(fqntrace fqntrace_C)
  if grep -q "fqntrace_analysis_native" "$dir/build.ninja"; then
    targets+=(fqntrace_analysis_native)
  fi
  cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
  local built=$(( $(date +%s) - start ))
  out="$(mktemp -d)"
  cp -r python/fqntrace "$out/"
  cp "$dir"/libfqntrace.so "$dir"/_C*.so "$out/fqntrace/"
  LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp" \
  PYTHONPATH="$out" FQNTRACE="$out/smoke.json" FQNTRACE_FORMATS=summary FQNTRACE_FLOPS=1 \
  FQNTRACE_SHAPES=1 OMP_NUM_THREADS=1 "$PY" tests/sanitize/python_smoke.py "$out"
  if [ -f "$dir"/_native_summary*.so ]; then
    cp "$dir"/_native_summary*.so "$out/fqntrace/analysis/"
    LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp" \
    PYTHONPATH="$out" OMP_NUM_THREADS=1 "$PY" -m pytest -q -p no:cacheprovider \
      tests/python/test_native_summary.py
  fi
  rm -rf "$out"
  echo "== ASan+UBSan Python smoke: built in ${built} s, ran in $(( $(date +%s) - start - built )) s"
}

python_smoke
