// A probe with no static initializer: asks RecordFunction whether any callback is installed.
// Loaded through ctypes after `import torch`, it shares the process's libtorch_cpu, so the answer
// is about the callbacks the running program sees (used by the FQNTRACE-unset check, P6).
#include <ATen/record_function.h>

extern "C" __attribute__((visibility("default"))) int fqntrace_bench_has_global_callbacks() {
  return at::hasGlobalCallbacks() ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) int fqntrace_bench_has_callbacks() {
  return at::hasCallbacks() ? 1 : 0;
}

// 1 when an op of scope FUNCTION would run any callback at all (global or thread-local).
extern "C" __attribute__((visibility("default"))) int fqntrace_bench_function_scope_active() {
  return at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION).has_value() ? 1 : 0;
}
