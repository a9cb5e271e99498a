// The time base of RawEvents. Callbacks stamp events in *ticks*: the CPU's time-stamp counter
// where the kernel itself keeps time with it (clocksource "tsc": constant rate, synchronized
// across cores), otherwise CLOCK_MONOTONIC nanoseconds. Reading the TSC costs ~10 ns against
// ~25 ns for clock_gettime through the vDSO, and the observer reads the clock twice per op. The
// drain turns ticks into monotonic nanoseconds (drain/tick_converter.h) before anything is written.
#pragma once
#include <atomic>
#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace fqntrace {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace clock_state {
// Chosen once per process (choose_tick_source) before the first callback is installed, never
// changed afterwards: ticks recorded under one session are converted by the same rule.
extern std::atomic<bool> g_ticks_are_tsc;
}  // namespace clock_state

// Picks the tick source for the process (the first call decides; later calls return that
// choice). force_monotonic (FQNTRACE_CLOCK=monotonic) keeps clock_gettime. True for the TSC.
bool choose_tick_source(bool force_monotonic = false);

inline bool ticks_are_tsc() { return clock_state::g_ticks_are_tsc.load(std::memory_order_relaxed); }

inline uint64_t now_ticks() {
#if defined(__x86_64__)
  if (ticks_are_tsc()) return __rdtsc();
#endif
  return monotonic_ns();
}

}  // namespace fqntrace
