// The thread's own CPU time, the measure `diff` gates on (docs/report.md): unlike wall time it
// does not grow while the thread waits for a core, so a busy machine does not inflate it.
//
// Read only where a module's time begins or ends: at a module scope's open and close (forward and
// recompute) and around each outermost backward cpu_op (an autograd node and its engine
// wrapper), never per forward op. Each read is a system call (CLOCK_THREAD_CPUTIME_ID has no
// vDSO path; ~180 ns here, docs/benchmarks.md). A range's *self* CPU time is its own reading
// less that of the ranges with CPU time inside it, so summing self times never counts a
// nanosecond twice, as with ops' self time. Opt-in (FQNTRACE_CPU=1): the readings cost a small
// model's step several percent (docs/benchmarks.md, *Thread CPU readings*).
#pragma once
#include <time.h>

#include <cstdint>

#include "buffer/event.h"

namespace fqntrace::thread_cpu {

inline uint64_t now_ns() {
  timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// ns into RawEvent::self_cpu's unit, rounded, saturating.
inline uint32_t to_units(uint64_t ns) {
  uint64_t units = (ns + kCpuUnitNs / 2) / kCpuUnitNs;
  return units > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(units);
}

}  // namespace fqntrace::thread_cpu
