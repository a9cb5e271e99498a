#include "buffer/ticks.h"

#include <fstream>
#include <mutex>
#include <string>

namespace fqntrace {

namespace clock_state {
std::atomic<bool> g_ticks_are_tsc{false};
}  // namespace clock_state

namespace {

// The kernel uses the TSC for CLOCK_MONOTONIC only when it found it constant-rate and
// synchronized across cores: exactly what cross-thread timestamps need.
bool kernel_trusts_tsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  std::getline(f, source);
  return source == "tsc";
}

}  // namespace

bool choose_tick_source(bool force_monotonic) {
  static std::once_flag once;
  std::call_once(once, [force_monotonic] {
#if defined(__x86_64__)
    bool tsc = !force_monotonic && kernel_trusts_tsc();
    clock_state::g_ticks_are_tsc.store(tsc, std::memory_order_relaxed);
#else
    (void)force_monotonic;
#endif
  });
  return ticks_are_tsc();
}

}  // namespace fqntrace
