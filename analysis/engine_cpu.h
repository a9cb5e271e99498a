// The analysis engines are compiled for simdjson's AVX2 kernel (CMakeLists.txt,
// fqntrace_analysis_module): a module checks the CPU before it loads, and on an older one the
// verbs take the Python path.
#pragma once

namespace fqntrace::analysis {

inline bool cpu_runs_engines() {
#if defined(__x86_64__) && defined(FQNTRACE_ENGINE_HASWELL)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
         __builtin_cpu_supports("pclmul");
#else
  return true;
#endif
}

}  // namespace fqntrace::analysis
