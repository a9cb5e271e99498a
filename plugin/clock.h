// Clocks. Callbacks stamp events in *ticks*: the CPU's time-stamp counter where the kernel itself
// keeps time with it (clocksource "tsc": constant rate, synchronized across cores), otherwise
// CLOCK_MONOTONIC nanoseconds. Reading the TSC costs ~10 ns against ~25 ns for clock_gettime
// through the vDSO, and the observer reads the clock twice per op. The drain thread turns ticks
// into monotonic nanoseconds (TickConverter) before anything is written.
#pragma once
#include <atomic>
#include <cstdint>
#include <ctime>
#include <vector>

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

inline uint64_t now_ticks() {
#if defined(__x86_64__)
  if (clock_state::g_ticks_are_tsc.load(std::memory_order_relaxed)) return __rdtsc();
#endif
  return monotonic_ns();
}

// Ticks → monotonic ns, on the drain thread (the caller serializes calls). A piecewise-linear
// map: it starts from a ~1 ms measurement of the tick rate and is re-measured against
// CLOCK_MONOTONIC at growing intervals (0.1 s … 10 s). Each new piece starts where the previous
// one ends, so the map stays continuous and increasing, and it begins at a tick later than any
// tick converted so far, so a tick converts to the same ns whenever it is converted (a node's
// flow source matches its forward op's start exactly). Identity when ticks are ns already.
class TickConverter {
 public:
  void start();                   // session start: first measurement
  void recalibrate_if_due();      // drain thread, before converting a batch
  uint64_t to_ns(uint64_t ticks) const;
  double ns_per_tick() const { return pieces_.empty() ? 1.0 : pieces_.back().ns_per_tick; }

 private:
  struct Pair {
    uint64_t tick;
    uint64_t ns;
  };
  struct Piece {
    uint64_t tick;  // first tick of the piece
    uint64_t ns;    // its ns
    double ns_per_tick;
  };
  static Pair measure();
  bool tsc_ = false;
  Pair first_{};
  uint64_t next_due_ns_ = 0;
  uint64_t interval_ns_ = 0;
  std::vector<Piece> pieces_;  // grows by one per re-measurement: ~360 per hour at most
};

}  // namespace fqntrace
